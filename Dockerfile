FROM python:3.11-slim
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends graphviz fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY projections ./projections
COPY streams ./streams
COPY localbroker ./localbroker
COPY examples ./examples
RUN pip install --no-cache-dir .
ENV RUMOURMILL_DATA_DIR=/var/lib/rumourmill \
    RUMOURMILL_WEB_HOST=0.0.0.0 \
    RUMOURMILL_WEB_PORT=6066
EXPOSE 6066
VOLUME ["/var/lib/rumourmill"]
ENTRYPOINT ["rumourmill"]
CMD ["worker"]
