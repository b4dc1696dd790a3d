# One image for the operator, the load generator, the built-in model server and the model fetcher:
#   kopf run -m kaliper.controllers.main      (the chart's default)
#   python -m kaliper.loadgen run|master|worker
#   python -m kaliper.serving --model ... --name ...
#   python -m kaliper.serving.fetch URL PATH
# Pinned base, wheels built in a separate stage, runs as a non-root user.
FROM python:3.11.10-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.10-slim-bookworm
RUN useradd --uid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kaliper
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 10001
ENV PYTHONUNBUFFERED=1
EXPOSE 8080
CMD ["kopf", "run", "--standalone", "--all-namespaces", "-m", "kaliper.controllers.main"]
