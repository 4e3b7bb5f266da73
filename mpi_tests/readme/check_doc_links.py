# SPDX-License-Identifier: Apache-2.0
"""Every relative link of README.md, CONTRIBUTING.md and docs/*.md must name a
file or folder of the repository, and a #fragment into a Markdown file one
of its headings (GitHub's anchors).

    python3 check_doc_links.py <repository root>

Prints each broken link with its file and line, and exits 1 if there is one.
"""
import pathlib
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*```")


def prose_lines(path):
    """(line number, text) outside fenced blocks, inline code removed."""
    in_fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, re.sub(r"`[^`]*`", "", line)


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    docs = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]
    broken, checked = [], 0
    for doc in docs:
        if not doc.exists():
            broken.append(f"{doc.relative_to(root)}: missing")
            continue
        for number, line in prose_lines(doc):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                    continue
                checked += 1
                path_part, _, fragment = target.partition("#")
                linked = (doc.parent / path_part).resolve() if path_part else doc
                where = f"{doc.relative_to(root)}:{number}: {target}"
                if not linked.exists():
                    broken.append(f"{where}: no such file")
                elif fragment and linked.suffix == ".md" and fragment not in anchors_of(linked):
                    broken.append(f"{where}: no heading with the anchor #{fragment}")
    for line in broken:
        print(line)
    print(f"docs_links: {checked} relative links checked, {len(broken)} broken")
    return 1 if broken else 0


def anchors_of(path):
    """Anchors of a Markdown file, headings read with their inline code as text."""
    found, seen = set(), {}
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else re.match(r"#{1,6}\s+(.*)", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


if __name__ == "__main__":
    sys.exit(main())
