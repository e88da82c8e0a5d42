FROM python:3.11-slim
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends graphviz fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*
# built from /src, then removed: run from /app, `python -m streams` would import the source
# tree, which lacks the compiled parts (projections/*.c, streams/*.c), instead of the install
COPY pyproject.toml setup.py README.md /src/
COPY schemas /src/schemas
COPY projections /src/projections
COPY streams /src/streams
COPY localbroker /src/localbroker
# a C compiler for the install only, removed after it
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir /src \
    && apt-get purge -y -qq gcc libc6-dev && apt-get autoremove -y -qq \
    && rm -rf /var/lib/apt/lists/* /src
WORKDIR /app
ENV RUMOURMILL_DATA_DIR=/var/lib/rumourmill \
    RUMOURMILL_WEB_HOST=0.0.0.0 \
    RUMOURMILL_WEB_PORT=6066
EXPOSE 6066
VOLUME ["/var/lib/rumourmill"]
ENTRYPOINT ["rumourmill"]
CMD ["worker"]
