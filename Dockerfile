FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 AHP_VAR_DIR=/var/lib/ahp
WORKDIR /app
COPY pyproject.toml README.md ./
COPY ahp ahp
COPY grants grants
COPY sessions_app sessions_app
COPY tools_app tools_app
COPY templates templates
COPY manage.py ./
RUN pip install --no-cache-dir . && mkdir -p /var/lib/ahp
EXPOSE 8000
CMD ["python", "-m", "ahp.serve", "-b", "0.0.0.0", "-p", "8000", "ahp.asgi:application"]
