# The KOPE memory server image (docker/compose.yml, profile "server"): KOPE installed from this
# repository; `kope serve` is the command compose runs. Build context: the repository root.
FROM python:3.11-slim
WORKDIR /opt/kope
COPY pyproject.toml setup.py README.md ./
COPY kope ./kope
COPY harness ./harness
COPY cypher ./cypher
COPY docker ./docker
RUN pip install --no-cache-dir . && useradd --create-home --uid 10001 kope && mkdir /data && chown kope /data
USER kope
EXPOSE 8765
CMD ["kope", "serve", "--host", "0.0.0.0", "--port", "8765", "--registry", "/data/registry.sqlite3"]
