FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 AHP_VAR_DIR=/var/lib/ahp
# bubblewrap confines everything the host runs for a tenant (docs/security.md); git cuts worktrees.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY ahp ahp
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
