from django.db import models


class HarnessConversation(models.Model):
    """The harness's own conversation a chat's turns resume (Claude's or Copilot's session id).
    A row, so a turn another worker runs, or one after a restart, resumes the same conversation
    (the harness keeps it in the session's sandbox home, under the host's var directory)."""

    chat = models.ForeignKey("sessions_app.Chat", on_delete=models.CASCADE, related_name="harness_conversations")
    provider = models.CharField(max_length=64)
    conversation_id = models.CharField(max_length=200)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chat", "provider"], name="one_conversation_per_chat_provider")]
