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
# not root: a user of its own, of group 0 as OpenShift's arbitrary user ids are, owning the
# data dir (a named volume mounted there takes its owner from it)
RUN useradd --system --uid 10001 --gid 0 --create-home --home-dir /home/rumourmill rumourmill \
    && mkdir -p /var/lib/rumourmill \
    && chown 10001:0 /var/lib/rumourmill && chmod 0770 /var/lib/rumourmill
USER 10001
WORKDIR /app
ENV RUMOURMILL_DATA_DIR=/var/lib/rumourmill \
    RUMOURMILL_WEB_HOST=0.0.0.0 \
    RUMOURMILL_WEB_PORT=6066
EXPOSE 6066
VOLUME ["/var/lib/rumourmill"]
# healthy once ready: its partitions assigned and their state recovered (/ready, asked where the
# worker listens: RUMOURMILL_WEB_HOST, loopback for every interface, and RUMOURMILL_WEB_PORT)
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=6 \
    CMD ["rumourmill", "ready", "--timeout", "4"]
ENTRYPOINT ["rumourmill"]
CMD ["worker"]
