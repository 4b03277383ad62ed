"""Charts drawn on the server as SVG: no script, no build step, readable without a browser."""
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def _svg(width, height, body, label):
    return mark_safe(f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
                     f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">{"".join(body)}</svg>')


def stacked_columns(columns: list[tuple[str, dict[str, int]]], series: list[tuple[str, str, str]], label: str,
                    width: int = 760, height: int = 220) -> SafeString:
    """`columns`: [(column label, {series key: count})]; `series`: [(key, label, colour)]."""
    left, bottom, top, legend = 36, 24, 8, 170
    plot_w, plot_h = width - left - legend, height - bottom - top
    peak = max([sum(counts.values()) for _, counts in columns] + [1])
    step = plot_w / max(len(columns), 1)
    body = [f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#999"/>',
            f'<text x="{left - 4}" y="{top + 10}" text-anchor="end" {FONT}>{peak}</text>',
            f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end" {FONT}>0</text>']
    for i, (column, counts) in enumerate(columns):
        x, y = left + i * step + 1, float(top + plot_h)
        for key, name, colour in series:
            n = counts.get(key, 0)
            if not n:
                continue
            h = plot_h * n / peak
            y -= h
            body.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(step - 2, 1):.1f}" height="{h:.1f}" '
                        f'fill="{colour}"><title>{escape(column)}: {n} {escape(name)}</title></rect>')
        if i % max(len(columns) // 8, 1) == 0:
            body.append(f'<text x="{x + step / 2:.1f}" y="{height - 8}" text-anchor="middle" {FONT}>'
                        f'{escape(column)}</text>')
    for j, (_, name, colour) in enumerate(series):
        y = top + 4 + j * 16
        body.append(f'<rect x="{width - legend + 10}" y="{y}" width="10" height="10" fill="{colour}"/>'
                    f'<text x="{width - legend + 26}" y="{y + 9}" {FONT}>{escape(name)}</text>')
    return _svg(width, height, body, label)


def bars(rows, label, width=760, row_height=22):
    """Horizontal bars: [(row label, value, limit or None)]. With a limit the bar is drawn
    against it (full width is the limit) and the row reads `value of limit`."""
    left, right = 220, 90
    plot_w = width - left - right
    peak = max([limit or value for _, value, limit in rows] + [1])
    body = []
    for i, (name, value, limit) in enumerate(rows):
        name = name if len(name) <= 34 else f"{name[:20]}…{name[-13:]}"
        y = i * row_height + 4
        scale = limit or peak
        w = plot_w * min(value, scale) / scale
        colour = "#c0392b" if limit and value >= limit else "#417690"
        if limit:
            body.append(f'<rect x="{left}" y="{y}" width="{plot_w}" height="{row_height - 8}" fill="#eee"/>')
        text = f"{value} of {limit}" if limit else f"{value}"
        body.append(f'<text x="{left - 6}" y="{y + row_height - 11}" text-anchor="end" {FONT}>{escape(name)}</text>'
                    f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{row_height - 8}" fill="{colour}">'
                    f'<title>{escape(name)}: {text}</title></rect>'
                    f'<text x="{left + plot_w + 6}" y="{y + row_height - 11}" {FONT}>{text}</text>')
    if not rows:
        body.append(f'<text x="{left}" y="16" {FONT}>nothing yet</text>')
    return _svg(width, max(len(rows), 1) * row_height + 8, body, label)
