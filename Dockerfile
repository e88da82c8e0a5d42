FROM python:3.11-slim
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends graphviz fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY schemas ./schemas
COPY projections ./projections
COPY streams ./streams
COPY localbroker ./localbroker
COPY examples ./examples
# a C compiler for the install only (projections/change_records.c), removed after it
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir . \
    && apt-get purge -y -qq gcc libc6-dev && apt-get autoremove -y -qq \
    && rm -rf /var/lib/apt/lists/*
ENV RUMOURMILL_DATA_DIR=/var/lib/rumourmill \
    RUMOURMILL_WEB_HOST=0.0.0.0 \
    RUMOURMILL_WEB_PORT=6066
EXPOSE 6066
VOLUME ["/var/lib/rumourmill"]
ENTRYPOINT ["rumourmill"]
CMD ["worker"]
