"""The documentation: the results tables are the record's (scripts/paper/results_tables.py), every
relative link and image resolves (scripts/check-links.py), the site builds without a
warning (scripts/docs.sh), and the pages speak of pens, not of how the work was done."""
import json
import re
import subprocess
import sys

from conftest import ROOT

TABLES = ROOT / "scripts" / "paper" / "results_tables.py"
LINKS = ROOT / "scripts" / "check-links.py"
# The empty block of generated tables a page carries where results_tables.py writes them.
TABLES_BLOCK = ("<!-- tables: written by scripts/paper/results_tables.py from docs/results.json -->\n"
                "<!-- /tables -->\n")


def test_the_tables_of_results_md_and_the_readme_are_drawn_from_results_json():
    done = subprocess.run([sys.executable, str(TABLES), str(ROOT / "docs" / "results.json"),
                           str(ROOT / "docs" / "results.md"), str(ROOT / "README.md"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def cell(method, labels, mean, splits, kind=None):
    record = {"method": method, "labels": labels, "splits": splits, "mean": mean, "std": 0.1,
              "errors": [mean] * splits, "minutes": [1.0] * splits, "epochs": [10.0] * splits,
              "command": f"build/pens train examples/mnist/{method}.json --labels {labels}"}
    if kind:
        record["kind"] = kind
    return record


def test_a_method_stands_as_its_best_recipe_with_the_most_splits(tmp_path):
    records = [cell("pea", 600, 4.05, 3), cell("pea-authors", 600, 2.39, 3),
               cell("pea+", 600, 1.50, 1),  # a one-split trial does not outrank PEA+'s 3-split recipe
               cell("pea+-authors", 600, 2.95, 3), cell("vat", 100, 2.17, 5, kind="consistency"),
               {**cell("pea-supervised-30-bfloat16", 60000, 1.67, 3, kind="precision"), "seeds": [1, 2, 3],
                "config": "pea-supervised.json, 30 epochs", "precision": "bfloat16"},
               {"task": "fine", "method": "ctn+s", "runs": 3, "mean": 47.1, "std": 0.28, "seeds": [1, 2, 3],
                "minutes": [30.0] * 3, "epochs": [60.0] * 3, "test_draws": [50] * 3},
               {"task": "fine", "method": "ctn+s-l2x2", "runs": 3, "mean": 49.0, "std": 0.1}]
    record = tmp_path / "results.json"
    record.write_text(json.dumps(records))
    md, readme = tmp_path / "results.md", tmp_path / "README.md"
    md.write_text("# Results\n\nkept above the tables\n")
    readme.write_text("# pens\n\n" + TABLES_BLOCK + "\n## After\n")
    subprocess.run([sys.executable, str(TABLES), str(record), str(md), str(readme)], check=True)
    page = md.read_text()
    assert page.startswith("# Results\n\nkept above the tables\n")
    assert "| PEA | pens | — | 2.39 ± 0.10 (3) | — | — | — |" in page
    assert "| PEA+ | pens | — | 2.95 ± 0.10 (3) | — | — | — |" in page
    assert "| PEA | 600 | pea-authors | [pea-authors.json](../examples/mnist/pea-authors.json) | 10 | 1.0 |" in page
    assert "| VAT | pens | 2.17 ± 0.10 (5) | — | — | — | — |" in page
    assert "| | published | 1.36 | — | 1.27 | — | — |" in page
    # The best of pens at each label count: cells with the protocol's splits only.
    assert "| **best of pens** | | 2.17 ± 0.10 (5), VAT | 2.39 ± 0.10 (3), PEA | — | — | — |" in page
    # The goal beside it: the miss where a best stands, the bare target where none does.
    assert "| **goal** | | ≤ 1.00: missed by 1.17 | ≤ 1.00: missed by 1.39 | ≤ 0.85 | ≤ 0.80 | ≤ 0.70 |" in page
    # A precision record is a row of its own table, not a cell of Table 1.
    assert "| pea-supervised.json, 30 epochs | bfloat16 | 1, 2, 3 | 1.67, 1.67, 1.67 | 1.67 ± 0.10 (3) |" in page
    # Table 2 is the table2.sh cells, not the variants measured beside them.
    assert "| Fine-grained | pens | — | — | — | — | — | 47.10 ± 0.28 (3) | — |" in page
    readme_text = readme.read_text()
    assert "| PEA, MNIST, 600 labels | 2.39 ± 0.10 (3) | 2.44 |" in readme_text
    assert readme_text.endswith("<!-- /tables -->\n\n## After\n")
    for figure in ("results-table1.png", "results-successors.png", "results-table2.png"):
        assert (tmp_path / "img" / figure).read_bytes().startswith(b"\x89PNG")
        assert f"(img/{figure})" in page
    # Written again from the same record: nothing changes, and --check agrees.
    before = page
    subprocess.run([sys.executable, str(TABLES), str(record), str(md), str(readme)], check=True)
    assert md.read_text() == before
    assert subprocess.run([sys.executable, str(TABLES), str(record), str(md), str(readme), "--check"]).returncode == 0
    # A new run in the record makes the pages stale.
    records[1]["mean"] = 2.30
    record.write_text(json.dumps(records))
    stale = subprocess.run([sys.executable, str(TABLES), str(record), str(md), str(readme), "--check"],
                           capture_output=True, text=True)
    assert stale.returncode == 1 and "results.md" in stale.stderr and "README.md" in stale.stderr


def test_a_mean_that_rounds_onto_the_goal_is_a_miss_shown_before_rounding(tmp_path):
    record, md, readme = tmp_path / "results.json", tmp_path / "results.md", tmp_path / "README.md"
    record.write_text(json.dumps([cell("pea-authors", 1000, 0.853, 3)]))
    md.write_text("# Results\n")
    readme.write_text(TABLES_BLOCK)
    subprocess.run([sys.executable, str(TABLES), str(record), str(md), str(readme)], check=True)
    assert ("| **goal** | | ≤ 1.00 | ≤ 1.00 | ≤ 0.85: missed by 0.003 (0.853 before rounding) | ≤ 0.80 | ≤ 0.70 |"
            in md.read_text())


def test_every_relative_link_and_image_of_the_docs_resolves():
    done = subprocess.run([sys.executable, str(LINKS), str(ROOT / "README.md"), str(ROOT / "docs")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert " 0 broken" in done.stdout


def test_the_link_check_finds_missing_files_and_anchors(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## The paper's tables, and why (%)\n\n```\n# not a heading\n```\n")
    (tmp_path / "page.md").write_text(
        "# Page\n\n"
        "[fine](other.md#the-papers-tables-and-why) and ![fine](other.md) [here](#page)\n"
        "[gone](missing.md) and ![gone](img/none.png)\n"
        "[wrong anchor](other.md#not-a-heading) and [also](#nowhere)\n"
        "`[in code](missing.md)` and [web](https://example.org/x)\n"
        "```\n[in a block](missing.md)\n```\n"
        '<img src="img/none.png" width="10">\n')
    done = subprocess.run([sys.executable, str(LINKS), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 1
    broken = sorted(line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith(str(tmp_path)))
    assert broken == sorted([
        "#nowhere: page.md has no heading with the anchor #nowhere",
        "img/none.png: no such file or folder",
        "img/none.png: no such file or folder",
        "missing.md: no such file or folder",
        "other.md#not-a-heading: other.md has no heading with the anchor #not-a-heading",
    ]), done.stdout


def test_the_docs_site_builds_without_warnings():
    done = subprocess.run(["bash", str(ROOT / "scripts" / "docs.sh")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr
    site = ROOT / "build-docs" / "site"
    results = (site / "docs" / "results.html").read_text()
    assert 'src="img/results-table1.png"' in results and (site / "docs" / "img" / "results-table1.png").exists()
    headers = (site / "docs" / "headers.html").read_text()
    assert "graph/graph.h" in headers and "Boost.Graph" in headers
    assert "pseudo-ensemble.png" in (site / "index.html").read_text()


def test_the_pages_speak_of_pens_not_of_how_the_work_was_done():
    words = re.compile(r"\b(sittings?|this session|working session)\b", re.I)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "docs" / "results.json"]
    found = [f"{page.name}:{n}" for page in pages
             for n, line in enumerate(page.read_text().splitlines(), 1) if words.search(line)]
    assert found == []
