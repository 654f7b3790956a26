"""Cells laid out so that each slide fits a 1280 x 720 canvas: rules, not hand-set metadata.

`fit(notebook)` estimates the height each cell takes on a slide (markdown by its
wrapped lines, headings, tables and formulas; code by its lines; outputs by their
lines and their images' sizes) and, walking the cells in order, starts a new
sub-slide where the next cell would overflow the one it is on. A cell taller than
a slide is split first: a markdown cell between its blocks (a long table between
rows, its header repeated), a code cell into its source and its outputs, each on a
sub-slide of its own; a source taller than its box is cut between top-level
statements, and an output taller than its box (printed text, a shown source)
between its lines, up to five boxes. A cell's own ``slide``, ``subslide``, ``skip``
or ``notes`` type is kept; a ``fragment`` that would overflow becomes a sub-slide (the next
press still shows it). What is still too tall on its own scrolls in a fixed box
(`CSS`): long code, long text output, and figures are capped in height.
"""

from __future__ import annotations

import base64
import copy
import math
import re
import struct

from .results import cells

SLIDE = 640  # px of content a 720 px slide holds, its margins left out
CODE_LINE, CODE_BOX = 23, 590  # a source line; the most a source takes before it scrolls (a source that tall sits
# on a sub-slide of its own: `split_code`, `fit`)
TEXT_LINE, TEXT_BOX = 21, 380  # an output line; the most a text output takes before it scrolls
MOST_PIECES = 5  # an output up to this many boxes tall is cut onto sub-slides; a longer one scrolls in its box
FIGURE_WIDTH, FIGURE_BOX = 1180, 500  # a figure is scaled to fit both
PROSE_LINE, PROSE_CHARS = 27, 105  # a line of markdown text, and how many characters it holds
CODE_CHARS, CELL = 110, 24  # an output line's characters before it wraps; the padding around each cell
SHOWN_CODE_CHARS, PRINTED_CHARS = 95, 80  # where a shown source's and printed text's lines wrap, counted safely
# (a printed line wraps between words, earlier than its characters say): cutting an output into pieces uses them
HEADINGS = {1: 95, 2: 75, 3: 60, 4: 45, 5: 40, 6: 40}
TABLE_ROW, FORMULA, MARKDOWN_IMAGE = 36, 70, 420
TABLE_LINE, TABLE_CHARS, CODE_WIDTH = 26, 90, 1.1  # a table row's each further line; the characters a table's row
# holds across the slide, its cells' padding counted; a code character's width in prose characters (measured on the
# 52 tables of the lectures in Chromium, 2026-11-30: the estimate is at most 25 px short of a table, most a few px over)
NEW_SLIDE = ("slide", "subslide")
KEPT = ("slide", "subslide", "skip", "notes")

CSS = f"""
/* Long code, long text output and figures stay within a slide: code and text scroll in a box. */
.reveal .jp-InputArea-editor pre {{ max-height: {CODE_BOX}px; overflow-y: auto; }}
.reveal .jp-OutputArea-output pre {{ max-height: {TEXT_BOX}px; overflow-y: auto; }}
/* A shown source (a fenced block of markdown output) is code: it has the code's box. */
.reveal .jp-OutputArea-output.jp-RenderedMarkdown pre {{ max-height: {CODE_BOX}px; }}
.reveal .jp-OutputArea-output img {{ max-height: {FIGURE_BOX}px; max-width: 100%; width: auto; height: auto; }}
/* A line longer than the slide is wide (about 95 characters of code) wraps instead of being cut at its edge. */
.reveal .jp-InputArea-editor pre, .reveal .jp-OutputArea-output pre {{
    white-space: pre-wrap; word-break: normal; overflow-wrap: break-word; }}
/* Long code in a table cell (a profiler metric's name) breaks only after its underscores and dots (`breakable_code`
   marks them), never inside a word: `overflow-wrap: anywhere` here cut `conv_implicit_gemm_warp_tiled` as
   `..._tile` / `d` and `OutOfBounds` as `OutOfBou` / `nds` (30 words in 11 tables of the lectures, seen in Chromium). */
/* A code box's width (100% of its cell) holds its padding: else its lines wrap 15 px past the cell's right edge, where
   the cell and the slide cut them (seen in lectures 2a to 7: the last letters of long lines missing). */
.reveal .jp-Cell pre {{ box-sizing: border-box; }}
/* A fenced block in a markdown cell is code at the code cells' size, not reveal's 0.55em (11 px on a slide). */
.reveal .jp-MarkdownCell pre {{ font-size: var(--jp-code-font-size); line-height: var(--jp-code-line-height); }}
"""


def slide_type(cell) -> str:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type") or "-"


def set_slide_type(cell, kind: str) -> None:
    cell.setdefault("metadata", {}).setdefault("slideshow", {})["slide_type"] = kind


def wrapped(lines, width: int) -> int:
    return sum(max(1, math.ceil(len(line) / width)) for line in lines)


def markdown_blocks(source: str) -> list[str]:
    """A markdown text cut at its blank lines, never inside a fenced code block or a ``$$`` formula."""
    blocks, current, fenced = [], [], False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("```") or stripped.startswith("$$") and (stripped == "$$" or not stripped.endswith("$$")):
            fenced = not fenced  # a fence opens or closes (a one-line $$...$$ formula does neither)
        if not line.strip() and not fenced:
            if current:
                blocks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


CODE_BREAK = re.compile(r"(?<=[^\W_]|\))[_.]+(?=[^\W_])")  # where code in a table cell may break: after a run of
# underscores or dots after a letter, digit or ")" and before a letter or digit (`l1tex__t_sectors.sum`: `l1tex__`,
# `t_`, `sectors.`, `sum`; `f(...).registers`: `f(...).`, `registers`)


def code_pieces(word: str) -> list[str]:
    """A code word in the pieces a table cell may break it into (`CODE_BREAK`): the browser breaks it nowhere else."""
    return CODE_BREAK.sub(lambda found: found[0] + "\0", word).split("\0")


def breakable_code(html: str) -> str:
    """``html`` with a ``<wbr>`` (a place to break a line, no character) at each `CODE_BREAK` of the code in its
    tables' cells, so that a long name wraps between its words, as `table_height` expects, and not inside one."""
    def in_code(found: re.Match) -> str:  # the code's text between its tags (an entity has no "_" or ".")
        return re.sub(r"(?<=>)[^<]+", lambda text: CODE_BREAK.sub(lambda at: at[0] + "<wbr>", text[0]), found[0])

    def in_table(found: re.Match) -> str:
        return re.sub(r"<code\b[^>]*>.*?</code>", in_code, found[0], flags=re.S)

    return re.sub(r"<table\b.*?</table>", in_table, html, flags=re.S | re.I)


def _cell_width(text: str) -> tuple[float, float]:
    """A table cell's width in prose characters, and its longest word's (where the browser may break it no further;
    code breaks after its underscores and dots too, `code_pieces`): markdown marks left out, code counted wider."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("**", "")
    parts = re.split(r"`+", text)
    prose, code = parts[0::2], parts[1::2]
    words = [len(w) for part in prose for w in part.split()] + [CODE_WIDTH * len(piece) for part in code
                                                                  for w in part.split() for piece in code_pieces(w)]
    return sum(map(len, prose)) + CODE_WIDTH * sum(map(len, code)), max(words, default=0)


def table_height(lines: list[str]) -> float:
    """A markdown table's rows (its ``| --- |`` line left out), laid out as a browser does: each column as wide as its
    widest cell when they all fit the slide's width, else its longest word and a share of the rest as wide as its
    text; a row is as many lines tall as its fullest cell needs."""
    rows = [[_cell_width(cell) for cell in cells(line)] for line in lines
            if not all(re.fullmatch(r":?-+:?", cell) for cell in cells(line))]
    if not rows:
        return 0.0
    pad = 2  # characters of padding each side of a cell's text, together
    count = max(map(len, rows))
    widest = [max((row[j][0] for row in rows if j < len(row)), default=0) + pad for j in range(count)]
    least = [max((row[j][1] for row in rows if j < len(row)), default=0) + pad for j in range(count)]
    if sum(widest) <= TABLE_CHARS:
        widths = widest
    else:
        spare, flexible = max(0.0, TABLE_CHARS - sum(least)), sum(w - m for w, m in zip(widest, least)) or 1
        widths = [m + spare * (w - m) / flexible for w, m in zip(widest, least)]
    lines_of = [max(max(1, math.ceil(text / max(widths[j] - pad, 1))) for j, (text, _) in enumerate(row)) for row in rows]
    return sum(TABLE_ROW + TABLE_LINE * (n - 1) for n in lines_of)


def block_height(block: str) -> float:
    """Estimated height of one markdown block (a paragraph, list, heading, table, fence or formula)."""
    lines = block.splitlines()
    first = lines[0].lstrip()
    if first.startswith("```"):
        return CODE_LINE * len(lines) + 20
    if first.startswith("$$"):
        return FORMULA * max(1, len(lines) // 3)
    if first.startswith("|"):
        return table_height(lines) + 20
    height = 20.0
    for line in lines:
        heading = re.match(r"(#{1,6})\s", line)
        if heading:
            height += HEADINGS[len(heading[1])]
        elif re.search(r"!\[[^\]]*\]\(|<img\b", line):
            height += MARKDOWN_IMAGE
        else:
            height += PROSE_LINE * wrapped([line], PROSE_CHARS) + FORMULA / 2 * line.count("$$")
    return height


def markdown_height(source: str) -> float:
    return CELL + sum(block_height(block) for block in markdown_blocks(source))


def png_size(data: str) -> tuple[int, int]:
    """Width and height of a base64 PNG, from its header."""
    head = base64.b64decode(data[:48])
    return struct.unpack(">II", head[16:24])


def output_height(output) -> float:
    """Estimated height of one code output."""
    if output.get("output_type") == "stream":
        return min(TEXT_BOX, TEXT_LINE * wrapped(output.get("text", "").splitlines(), CODE_CHARS)) + 12
    if output.get("output_type") == "error":
        return min(TEXT_BOX, TEXT_LINE * len("\n".join(output.get("traceback", [])).splitlines())) + 12
    data = output.get("data", {})
    if "image/png" in data:
        meta = output.get("metadata", {}).get("image/png", {})
        width, height = png_size(data["image/png"])
        width, height = meta.get("width", width), meta.get("height", height)
        return min(FIGURE_BOX, height * min(1, FIGURE_WIDTH / max(width, 1))) + 12
    if "text/html" in data:
        return min(SLIDE, TABLE_ROW * (data["text/html"].count("<tr") or 1) + 20)
    if "text/markdown" in data:
        return markdown_height(data["text/markdown"])
    if "text/plain" in data:
        return min(TEXT_BOX, TEXT_LINE * wrapped(data["text/plain"].splitlines(), CODE_CHARS)) + 12
    return 0.0


def source_height(source: str) -> float:
    return min(CODE_BOX, CODE_LINE * len(source.splitlines())) + 20 if source.strip() else 0.0


def cell_height(cell) -> float:
    if slide_type(cell) in ("skip", "notes"):
        return 0.0
    if cell["cell_type"] == "markdown":
        return markdown_height(cell["source"])
    if cell["cell_type"] != "code":
        return 0.0
    hidden = cell.get("metadata", {}).get("transient", {}).get("remove_source", False)
    return CELL + (0 if hidden else source_height(cell["source"])) + sum(map(output_height, cell.get("outputs", [])))


def split_markdown(cell) -> list:
    """A markdown cell as pieces each shorter than a slide, cut between blocks (a table between rows)."""
    pieces, current = [], []

    def flush():
        if current:
            pieces.append("\n\n".join(current))
            current.clear()

    def headings_only() -> bool:  # a piece of nothing but headings would be a slide with a title alone
        return bool(current) and all(re.fullmatch(r"#{1,6}\s.*", line) for b in current for line in b.splitlines())

    def announces() -> bool:  # a piece ending with a colon would be a slide without what it announces
        return bool(current) and current[-1].rstrip().endswith(":")

    for block in markdown_blocks(cell["source"]):
        lines = block.splitlines()
        taller = block_height(block) > SLIDE - CELL or (headings_only() or announces()) and markdown_height(
            "\n\n".join([*current, block])) > SLIDE  # than a slide, or than what its heading or lead-in leaves of one
        if lines[0].lstrip().startswith("|") and taller and len(lines) > 3:
            header, rows = lines[:2], lines[2:]
            for row in rows:
                if current and markdown_height("\n\n".join(current) + "\n" + row) > SLIDE:
                    flush()
                if not current or not current[-1].startswith(header[0]):
                    current.append("\n".join(header))
                current[-1] += "\n" + row
            continue
        if current and markdown_height("\n\n".join([*current, block])) > SLIDE:
            flush()
        current.append(block)
    flush()
    cells = []
    for number, text in enumerate(pieces):
        piece = renamed(cell, number)
        piece["source"] = text
        if number:
            set_slide_type(piece, "-")
            piece.get("metadata", {}).pop("tags", None)
        cells.append(piece)
    return cells


def renamed(cell, number: int):
    """A deep copy of ``cell`` as its piece ``number`` (the first keeps the cell's id)."""
    piece = copy.deepcopy(cell)
    if number and "id" in piece:
        piece["id"] = f"{piece['id']}-{number}"
    return piece


def _fence(lines: list[str], language: str) -> str:
    return "\n".join([f"```{language}", *lines, "```"])


def _cut(lines: list[str], height) -> list[list[str]]:
    """``lines`` in the fewest consecutive runs whose ``height(run)`` fits `TEXT_BOX` (one line at least), as even
    as they come: the lowest cap that needs no more runs than `TEXT_BOX` does (no one-line run after full ones)."""
    def runs_under(cap: float) -> list[list[str]]:
        runs = [[]]
        for line in lines:
            if runs[-1] and height([*runs[-1], line]) > cap:
                runs.append([])
            runs[-1].append(line)
        return runs

    fewest, low, high = len(runs_under(TEXT_BOX)), 0.0, float(TEXT_BOX)
    while high - low > 1:  # the runs' count only grows as the cap falls
        middle = (low + high) / 2
        low, high = (low, middle) if len(runs_under(middle)) <= fewest else (middle, high)
    return runs_under(high)


def _may_cut_before(lines: list[str], k: int) -> bool:
    """Whether a listing may be cut before line ``k``: a line that starts a statement at any depth, not a clause
    or closing bracket of the one before, nor the body of the line before (a ``for ...:`` stays with its first
    line), nor the line after a decorator, a comment or an open bracket."""
    line, before = lines[k].strip(), re.sub(r"\s+#.*$", "", lines[k - 1]).rstrip()  # its code, a comment aside
    return bool(line) and not line.startswith(_NOT_A_STATEMENT) and not before.lstrip().startswith(("@", "#")) \
        and not before.endswith(("\\", "(", "[", "{", ",", ":"))


def _cut_code(lines: list[str]) -> list[list[str]]:
    """A shown source's ``lines`` in runs that fit the code's box each, cut before a statement (`_may_cut_before`):
    the shallowest in the second half of what fits (the latest of those), so that runs stay full; else the latest
    such statement; between any lines where none fits."""
    def fits(run) -> bool:  # in the code's box, and a cell holding it alone on a slide
        return (CODE_LINE * wrapped(run, SHOWN_CODE_CHARS) + 20 <= CODE_BOX
                and CELL + markdown_height(_fence(run, "")) <= SLIDE)

    runs, start = [], 0
    while not fits(lines[start:]):
        ends = [k for k in range(start + 1, len(lines)) if fits(lines[start:k])]
        good = [k for k in ends if _may_cut_before(lines, k)]
        late = [k for k in good if k - start >= (ends[-1] - start) / 2]
        depth = lambda k: len(lines[k]) - len(lines[k].lstrip())  # noqa: E731
        end = max(late, key=lambda k: (-depth(k), k)) if late else good[-1] if good else ends[-1]
        runs.append(lines[start:end])
        start = end
    return [*runs, lines[start:]]


def _with(node, key: str, value):
    """A copy of ``node``, a cell or an output (of its own type: a notebook's node stays one), with ``key`` set to
    ``value``."""
    piece = copy.deepcopy(node)
    piece[key] = value
    return piece


def output_pieces(output) -> list:
    """An output taller than its box, cut between lines into outputs that each fit it: text printed (a stream),
    or a shown source (markdown that is one fenced code block), up to `MOST_PIECES` boxes tall; any other output,
    or a longer one (it scrolls in its box), as it is."""
    if output.get("output_type") == "stream":
        lines = output.get("text", "").splitlines()
        runs = _cut(lines, lambda run: TEXT_LINE * wrapped(run, PRINTED_CHARS) + 12)
        made = [_with(output, "text", "\n".join(run) + "\n") for run in runs]
    elif re.fullmatch(r"```(\w*)\n.*\n```\s*", output.get("data", {}).get("text/markdown", ""), re.S):
        language, *lines = output["data"]["text/markdown"].strip().splitlines()[:-1]
        runs = _cut_code(lines)
        made = [_with(output, "data", {"text/markdown": _fence(run, language.strip("`"))}) for run in runs]
    else:
        return [output]
    return made if 1 < len(made) <= MOST_PIECES else [output]


_NOT_A_STATEMENT = ("else", "elif", "except", "finally", ")", "]", "}")  # top-level lines that continue one


def _starts_a_statement(lines: list[str], k: int) -> bool:
    """Whether line ``k`` starts a top-level statement where a source may be cut (`_may_cut_before`)."""
    return bool(lines[k][:1].strip()) and _may_cut_before(lines, k)


def source_pieces(source: str) -> list[str]:
    """A source taller than its box, cut before top-level statements into as few pieces as fit the box each; the
    source whole where no such cut makes them fit."""
    lines = source.splitlines()

    def fits(run) -> bool:  # a line longer than the box is wide wraps (`CSS`)
        return CODE_LINE * wrapped(run, SHOWN_CODE_CHARS) <= CODE_BOX

    if fits(lines):
        return [source]
    cuts = [k for k in range(1, len(lines)) if _starts_a_statement(lines, k)]
    pieces, start = [], 0
    while not fits(lines[start:]):
        fitting = [k for k in cuts if k > start and fits(lines[start:k])]
        if not fitting:
            return [source]
        pieces.append("\n".join(lines[start:fitting[-1]]).rstrip())
        start = fitting[-1]
    return [*pieces, "\n".join(lines[start:])]


def split_code(cell) -> list:
    """A code cell as its source (no outputs; cut between top-level statements where taller than its box,
    `source_pieces`), then its outputs (source hidden) in as few cells as fit, each output taller than its box
    first cut between its lines (`output_pieces`)."""
    cells = []
    for number, text in enumerate(source_pieces(cell["source"])):
        piece = renamed(cell, number)
        piece["source"], piece["outputs"] = text, []
        if number:
            set_slide_type(piece, "-")
        cells.append(piece)
    groups, used = [[]], 0.0
    for output in (piece for output in cell.get("outputs", []) for piece in output_pieces(output)):
        height = output_height(output)
        if groups[-1] and used + height > SLIDE - CELL:
            groups.append([])
            used = 0.0
        groups[-1].append(output)
        used += height
    for outputs in (group for group in groups if group):
        piece = renamed(cell, len(cells))
        piece["outputs"] = outputs
        piece.setdefault("metadata", {})["transient"] = {"remove_source": True}
        set_slide_type(piece, "-")
        cells.append(piece)
    return cells


def pieces(cell) -> list:
    """``cell``, or the cells it is split into when it is taller than a slide or its source or an output of it
    would scroll."""
    if slide_type(cell) in ("skip", "notes"):
        return [cell]
    if cell["cell_type"] == "markdown":
        return split_markdown(cell) if cell_height(cell) > SLIDE else [cell]
    if cell["cell_type"] != "code" or not cell["source"].strip():
        return [cell]
    cut = len(source_pieces(cell["source"])) > 1 or any(len(output_pieces(o)) > 1 for o in cell.get("outputs", []))
    return split_code(cell) if cut or (cell_height(cell) > SLIDE and cell.get("outputs")) else [cell]


def _only_headings(cells_) -> bool:
    """Whether the shown cells ``cells_`` are nothing but markdown headings (a slide of a title alone)."""
    shown = [cell for cell in cells_ if slide_type(cell) not in ("skip", "notes")]
    return all(cell["cell_type"] == "markdown" and all(re.fullmatch(r"#{1,6}\s.*", line)
                                                       for line in cell["source"].strip().splitlines())
               for cell in shown)


def _introduces(cell) -> bool:
    """A markdown cell that ends with a colon: it announces the cell after it (a code cell, a figure, a table)."""
    return cell["cell_type"] == "markdown" and cell["source"].rstrip().endswith(":")


def _lead_in(laid: list, last: int | None, start: int, height: float) -> int | None:
    """Where a sub-slide starts, before a cell ``height`` tall that does not fit on the slide begun at ``laid[start]``,
    so that the sentence announcing it goes with it: the announcing cell ``laid[last]`` itself, or its last block,
    cut off into a cell of its own where the block before it ends a sentence. None where it cannot (no such cell, a
    sentence would be cut, nothing would fit, or a title would stay alone on the slide it leaves)."""
    if last is None or not _introduces(laid[last]):
        return None
    lead = laid[last]
    if lead["source"].lstrip()[:1].islower():  # it goes on the sentence of the cell before it
        return None
    if (last > start and slide_type(lead) not in NEW_SLIDE and cell_height(lead) + height <= SLIDE
            and not _only_headings(laid[start:last])):
        set_slide_type(lead, "subslide")
        return last
    blocks = markdown_blocks(lead["source"])
    head, tail = "\n\n".join(blocks[:-1]), blocks[-1]
    if len(blocks) < 2 or not re.search(r"[.!?][)*_\]]*$", blocks[-2].rstrip()) or tail[:1].islower() \
            or markdown_height(tail) + height > SLIDE or _only_headings(
            [*laid[start:last], _with(lead, "source", head)]):
        return None
    piece = _with(lead, "source", tail)
    if "id" in piece:
        piece["id"] = f"{lead['id']}-lead"
    set_slide_type(piece, "subslide")
    piece.get("metadata", {}).pop("tags", None)
    lead["source"] = head
    laid.insert(last + 1, piece)
    return last + 1


def fit(notebook) -> None:
    """Split tall cells and start sub-slides where the next cell would overflow (in place); a sentence that announces
    the cell that overflows (it ends with a colon) moves to the new sub-slide with it (`_lead_in`)."""
    cells = [piece for cell in notebook.cells for piece in pieces(cell)]
    laid, used, start, last = [], 0.0, 0, None  # the cells laid out; the first and last shown on the current slide
    for cell in cells:
        kind, height = slide_type(cell), cell_height(cell)
        if kind in NEW_SLIDE:
            used, start = height, len(laid)
        elif kind not in KEPT and used and used + height > SLIDE:
            lead = _lead_in(laid, last, start, height)
            if lead is None:
                set_slide_type(cell, "subslide")
                used, start = height, len(laid)
            else:
                used, start = sum(map(cell_height, laid[lead:])) + height, lead
        else:
            used += height
        laid.append(cell)
        if kind not in ("skip", "notes"):
            last = len(laid) - 1
    notebook.cells = laid
