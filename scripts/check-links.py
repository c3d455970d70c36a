#!/usr/bin/env python3
"""Checks every relative link and image in the given markdown files (folders: the .md
files in them): the file or folder it names exists, and an anchor (#...) names a heading
of the page it points to, as the docs site (mkdocs, Python-Markdown's toc) spells
headings. Links into code blocks and code spans are not links; web addresses are not
checked. Prints one line per broken link (FILE:LINE: ...) and exits 1 if there is any.

usage: check-links.py PATH...      (scripts/docs.sh runs it on README.md and docs/)
"""
import re
import sys
import unicodedata
from pathlib import Path

# [text](target "title") and ![alt](target); <img src="..."> and <a href="..."> in HTML.
MARKDOWN_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"<(?:img|a)\b[^>]*\b(?:src|href)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def slugify(heading):
    """A heading's anchor as Python-Markdown's toc extension makes it (mkdocs' default)."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"`|\*\*|__", "", text)  # code and emphasis marks are not in the anchor
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text, not its target
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def lines_outside_code(text):
    """(line number, line) of the text outside fenced code blocks, code spans blanked."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence is None:
            yield number, CODE_SPAN.sub(lambda span: " " * len(span.group(0)), line)


def anchors(path, cache={}):
    """The anchors of a markdown file's headings, numbered as the toc numbers repeats."""
    if path not in cache:
        found = set()
        for _, line in lines_outside_code(path.read_text(encoding="utf-8")):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                slug, n = slugify(m.group(1)), 1
                unique = slug
                while unique in found:
                    unique = f"{slug}_{n}"
                    n += 1
                found.add(unique)
        cache[path] = found
    return cache[path]


def broken_links(path):
    text = path.read_text(encoding="utf-8")
    for number, line in lines_outside_code(text):
        for m in list(MARKDOWN_LINK.finditer(line)) + list(HTML_LINK.finditer(line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path.resolve()
            if not resolved.exists():
                yield f"{path}:{number}: {target}: no such file or folder"
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                yield f"{path}:{number}: {target}: {resolved.name} has no heading with the anchor #{anchor}"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    files = []
    for arg in map(Path, sys.argv[1:]):
        files += sorted(arg.glob("*.md")) if arg.is_dir() else [arg]
    problems = [problem for f in files for problem in broken_links(f)]
    for problem in problems:
        print(problem)
    links = sum(1 for f in files for _, line in lines_outside_code(f.read_text(encoding="utf-8"))
                for _ in MARKDOWN_LINK.finditer(line))
    print(f"check-links: {len(files)} files, {links} links, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
