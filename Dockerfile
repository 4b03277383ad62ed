FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 AHP_VAR_DIR=/var/lib/ahp AHP_HARNESS_DIR=/app/var/harness
# bubblewrap confines everything the host runs for a tenant (docs/security.md); git cuts worktrees;
# Node runs the harness CLIs (claude, copilot), which `make harness` installs pinned.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap git make nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY Makefile ./
RUN make harness && test -f var/harness/.installed
COPY pyproject.toml README.md ./
COPY ahp ahp
COPY kernel kernel
COPY grants grants
COPY sandbox sandbox
COPY sessions_app sessions_app
COPY tools_app tools_app
COPY agents agents
COPY console console
COPY templates templates
COPY manage.py ./
RUN pip install --no-cache-dir . && mkdir -p /var/lib/ahp
EXPOSE 8000
CMD ["python", "-m", "ahp.serve", "-b", "0.0.0.0", "-p", "8000", "ahp.asgi:application"]
