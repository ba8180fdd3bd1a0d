# syntax=docker/dockerfile:1
# snapready images. Targets:
#   runtime (default): the webhook server, `snapready serve`, non-root UID 65532, works with a
#                      read-only root filesystem (nothing is written at run time).
#   helpers:           the rehydration helpers copied into selected pods by the injected native
#                      sidecar (its command copies /opt/snapready/helpers/* to /snapready/, then waits).
# Build: docker build -t snapready .   and   docker build --target helpers -t snapready-helpers .
# Pin the base images by digest in your own builds (--build-arg PYTHON_IMAGE=python:3.11-slim@sha256:...).

ARG PYTHON_IMAGE=python:3.11-slim
ARG BUSYBOX_IMAGE=busybox:1.36.1

# --- build: a virtualenv with snapready and its dependencies ---------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
RUN python -m venv /opt/snapready/venv
COPY pyproject.toml README.md ./
COPY webhook ./webhook
# A non-editable install: the runtime image needs the venv only, not /src. pip compiles the
# bytecode here, because the root filesystem is read-only at run time.
RUN /opt/snapready/venv/bin/pip install .

# --- helpers: only the two helper files, on a tiny base with sh, cp, mv and sleep -----------
FROM ${BUSYBOX_IMAGE} AS helpers
COPY --chmod=0755 webhook/assets/helpers/rehydrate /opt/snapready/helpers/rehydrate
COPY --chmod=0644 webhook/assets/helpers/snapready_rehydrate.py /opt/snapready/helpers/snapready_rehydrate.py
USER 65532:65532

# --- runtime: the venv on the same slim Python (the venv's python links to it) ---------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="snapready" \
      org.opencontainers.image.description="Admission webhook that makes GKE Pod snapshots safe to rely on" \
      org.opencontainers.image.licenses="Apache-2.0"
# HOME=/tmp: UID 65532 has no passwd entry; libraries that cache under ~ get the writable /tmp
# (an emptyDir in the chart).
ENV PATH=/opt/snapready/venv/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/snapready/venv /opt/snapready/venv
WORKDIR /tmp
# Fixed numeric UID/GID (the distroless "nonroot" id): Kubernetes' runAsNonRoot can verify a
# numeric user, and the chart's securityContext uses the same ids.
USER 65532:65532
# 10250: HTTPS webhook port (GKE private clusters reach nodes only on 443 and 10250).
# 8080: plain-HTTP /metrics.
EXPOSE 10250 8080
ENTRYPOINT ["snapready", "serve"]
