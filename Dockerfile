# bootimage-controller: the daemon (`run`, the default), the node agent (`aleph-report`) and the
# admin commands (`plan`, `release-claims`, `rollback`) in one image.
#
#   podman build -t localhost/bootimage-controller:0.1.0 .
#
# Dependencies are pinned by constraints.txt (hack/gen_constraints.py) and hash-locked by
# requirements.lock (hack/gen_lock.py), so the image runs the
# versions the tests ran. Everything is installed at build time: at run time the process talks only
# to the API server and, for cloud verification, to the cloud APIs.
# Pinned by digest: a rebuild gets the same base, whatever `latest` points at that day. This is the
# ubi9/python-311 build of October 2025 (the digest public Dockerfiles pin for it); to move on:
#   skopeo inspect docker://registry.access.redhat.com/ubi9/python-311:latest --format '{{.Digest}}'
ARG BASE_IMAGE=registry.access.redhat.com/ubi9/python-311@sha256:47e23afaf5daf6a98e76a3b5a924b85bbcb19c72b5c6ac474a418aea54cd8aae
FROM ${BASE_IMAGE}

LABEL name="bootimage-controller" \
      summary="Keeps OpenShift worker MachineSet boot images current and enforces boot image skew" \
      io.k8s.display-name="bootimage-controller" \
      io.k8s.description="Reconciles MachineSet boot images against the coreos-bootimages ConfigMap" \
      io.openshift.tags="openshift,machine-api,rhcos,boot-image"

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AWS_EC2_METADATA_DISABLED=true \
    NO_GCE_CHECK=True

# The base image's build user (1001) owns /opt/app-root, whose virtualenv is already on PATH.
WORKDIR /opt/app-root/src

# Dependencies first, from the pins alone, so a source change does not reinstall them: every wheel
# checked against the sha256 recorded in requirements.lock (hack/gen_lock.py), binaries only.
COPY --chown=1001:0 constraints.txt requirements.lock ./
RUN pip install --require-hashes --no-deps --only-binary=:all: -r requirements.lock

# Then the package itself, against the same pins. --no-deps + `pip check`: a dependency that
# constraints.txt does not pin fails the build instead of being installed at whatever version.
# Bytecode is compiled now because the root filesystem is read-only at run time.
COPY --chown=1001:0 pyproject.toml README.md LICENSE ./
COPY --chown=1001:0 bootimage_controller ./bootimage_controller
RUN pip install -c constraints.txt --no-deps . \
 && pip check \
 && python -m compileall -q $(python -c 'import sysconfig; print(" ".join({sysconfig.get_paths()[k] for k in ("purelib", "platlib")}))') \
 && rm -rf ./bootimage_controller ./build ./*.egg-info \
 && bootimage-controller --version

# Non-root; on OpenShift the restricted SCC picks an arbitrary UID in group 0, which works too.
USER 1001

EXPOSE 8080 8081

ENTRYPOINT ["bootimage-controller"]
CMD ["run"]
