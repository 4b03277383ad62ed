"""Output bounding: a tool's text over 2000 lines or 50 KiB is cut, the whole kept apart."""
from typing import Any

MAX_OUTPUT_LINES = 2000
MAX_OUTPUT_BYTES = 50 * 1024


def bound_output(text: str, full_text_uri: str) -> tuple[str, bool]:
    """Cut a tool's text over 2000 lines or 50 KiB; answer (text offered, whether it was cut).
    The caller keeps the full text at `full_text_uri`, which the cut text names."""
    lines = text.split("\n")
    cut = text
    if len(lines) > MAX_OUTPUT_LINES:
        cut = "\n".join(lines[:MAX_OUTPUT_LINES])
    encoded = cut.encode()
    if len(encoded) > MAX_OUTPUT_BYTES:
        cut = encoded[:MAX_OUTPUT_BYTES].decode(errors="ignore")
    if cut == text:
        return text, False
    shown_lines = cut.count("\n") + 1
    note = (
        f"\n[Output cut: showing {shown_lines} of {len(lines)} lines, {len(cut.encode())} of "
        f"{len(text.encode())} bytes. The full output is at {full_text_uri}.]"
    )
    return cut + note, True


def result_text(result: dict[str, Any]) -> str:
    texts = [c.get("text", "") for c in result.get("content") or () if c.get("type") == "text"]
    if texts:
        return "\n".join(texts)
    if not result.get("success"):
        return (result.get("error") or {}).get("message", "")
    message = result.get("pastTenseMessage", "")
    return message if isinstance(message, str) else message.get("markdown", "")


def bound_result(result: dict[str, Any], call_id: Any) -> tuple[dict[str, Any], str | None]:
    """Cut over-long text content. Answers (result offered, full text or None when nothing was cut)."""
    content, cut_any = [], False
    for item in result.get("content") or ():
        if item.get("type") == "text":
            text, cut = bound_output(item["text"], f"ahp-tool-output:/{call_id}")
            cut_any = cut_any or cut
            item = {**item, "text": text}
        content.append(item)
    if not cut_any:
        return result, None
    return {**result, "content": content}, result_text(result)
