"""scripts/paper/results_trees.py, the report of scripts/paper/table2.sh: a cell measured again
replaces its record and keeps the one it replaced; writing the same runs again adds
nothing; cells and records it did not measure stay."""
import json
import subprocess
import sys

from conftest import ROOT


def finished_run(folder, test_accuracy, epochs=20.0, final=None):
    """A run's summary.json; `final` (samples, test accuracy): the best dev epoch's model
    evaluated again with more subspace draws, as pens train does for eval.final_samples."""
    folder.mkdir(parents=True, exist_ok=True)
    best_dev = {"epoch": 7.0, "test_root_accuracy": test_accuracy}
    if final:
        best_dev["final_evaluation"] = {"samples": final[0], "test_root_accuracy": final[1]}
    (folder / "summary.json").write_text(json.dumps({
        "status": "finished", "epochs": epochs, "wall_seconds": 600.0, "config": {"eval": {"samples": 10}},
        "best_dev": best_dev}))


def report(runs, md, results, command):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "paper" / "results_trees.py"), str(runs), str(md), str(results),
                    command], check=True)
    return {(r.get("task"), r["method"]): r for r in json.loads(results.read_text())}


def test_a_cell_measured_again_keeps_the_record_it_replaces(tmp_path):
    runs = tmp_path / "runs"
    # Seed 1 evaluated its best dev epoch's model again with 50 draws: that is its figure.
    finished_run(runs / "fine-ctn+s" / "seed1", 0.40, final=(50, 0.42))
    finished_run(runs / "fine-ctn+s" / "seed2", 0.44)
    # A run still going (no summary) and a stopped one are not counted.
    (runs / "fine-ctn+s" / "seed3").mkdir()
    finished_run(runs / "binary-ctn" / "seed1", 0.80)
    (runs / "binary-ctn" / "seed1" / "summary.json").write_text(json.dumps({"status": "diverged"}))

    old = {"task": "fine", "method": "ctn+s", "runs": 3, "mean": 28.45, "std": 4.61, "accuracies": [33.4, 26.0, 25.9],
           "epochs": [9.0, 6.5, 4.0], "minutes": [8.0, 8.0, 8.0], "command": "scripts/paper/table2.sh --budget-minutes 8"}
    untouched = {"task": "binary", "method": "ctn", "runs": 3, "mean": 80.29, "std": 0.81,
                 "accuracies": [80.0, 81.0, 79.9], "epochs": [40.0, 41.0, 44.0], "minutes": [8.0, 8.0, 8.0],
                 "command": "scripts/paper/table2.sh --budget-minutes 8"}
    mnist = {"method": "pea", "labels": 100, "mean": 11.1}
    other_tree_run = {"task": "binary", "method": "ctn-roots-only", "runs": 1, "mean": 74.85}
    results = tmp_path / "results.json"
    results.write_text(json.dumps([mnist, old, untouched, other_tree_run]))
    md = tmp_path / "results.md"
    md.write_text("# Results\n")

    # The cell's model was made with table2.sh --cell authors: M starts at the identity.
    (runs / "fine-ctn+s" / "model.json").write_text(json.dumps({"parameters": [
        {"name": "Ml", "init": {"kind": "uniform", "limit": 0.06, "diagonal": 1.0}}]}))
    # ... and its config with --optimizer authors (AdaGrad restarts) and --lowercase.
    (runs / "fine-ctn+s" / "config.json").write_text(json.dumps({
        "optimizer": {"kind": "adagrad", "learning_rate": 0.01, "epsilon": 1e-3, "restart_every_epochs": 9},
        "data": {"dir": "sst", "min_count": 1, "lowercase": True}}))

    records = report(runs, md, results, "scripts/paper/table2.sh --epochs 20")
    fresh = records[("fine", "ctn+s")]
    assert (fresh["runs"], fresh["accuracies"], fresh["mean"], fresh["cell"], fresh["optimizer"], fresh["words"]) == \
        (2, [42.0, 44.0], 43.0, "authors", "authors", "lowercase")
    assert fresh["test_draws"] == [50, 10]
    assert fresh["superseded"] == [old]
    assert records[("binary", "ctn")] == untouched
    assert records[(None, "pea")] == mnist
    assert records[("binary", "ctn-roots-only")] == other_tree_run  # not a Table 2 cell: kept as it was
    text = md.read_text()
    assert "| CTN+S | 43.00 ± 1.41 | 47.5 | - | 87.8 | 2/- | 20.0/- | 10/- | 10+50/- | authors/- | authors/- " \
        "| lowercase/- |" in text
    # A record from before test draws, --cell, --optimizer and --lowercase existed: draws unknown, the scaled cell,
    # plain AdaGrad, exact words.
    assert "| CTN | - | 43.1 | 80.29 ± 0.81 | 83.4 | -/3 | -/41.7 | -/8 | -/? | -/scaled | -/plain | -/exact |" in text

    # The same runs reported again: the same record, the replaced one kept once; so too
    # when a campaign over another cell reports them (its command is not theirs).
    assert report(runs, md, results, "scripts/paper/table2.sh --epochs 20") == records
    assert report(runs, md, results, "scripts/paper/table2.sh --epochs 60 --methods ctn") == records
    # A third campaign replaces the second and keeps both before it, newest first.
    finished_run(runs / "fine-ctn+s" / "seed3", 0.45)
    third = report(runs, md, results, "scripts/paper/table2.sh --epochs 30")[("fine", "ctn+s")]
    assert third["accuracies"] == [42.0, 44.0, 45.0]
    assert third["test_draws"] == [50, 10, 10]
    assert [r["command"] for r in third["superseded"]] == ["scripts/paper/table2.sh --epochs 20", old["command"]]
    assert "superseded" not in third["superseded"][0]


def test_the_learning_curves_average_the_seeds_at_the_epochs_all_reached(tmp_path):
    runs = tmp_path / "runs"

    def logged(folder, lines):
        (folder / "metrics.jsonl").write_text(
            "".join(json.dumps({"epoch": float(e), "dev_root_accuracy": d, "train_root_accuracy": t}) + "\n"
                    for e, d, t in lines))

    finished_run(runs / "fine-ctn+s" / "seed1", 0.42)
    finished_run(runs / "fine-ctn+s" / "seed2", 0.44)
    finished_run(runs / "binary-ctn" / "seed1", 0.80)
    # Seed 1 resumed from the checkpoint of epoch 1: epoch 2 logged twice, the last counts.
    logged(runs / "fine-ctn+s" / "seed1", [(1, 0.30, 0.20), (2, 0.99, 0.99), (2, 0.34, 0.24), (3, 0.36, 0.26)])
    logged(runs / "fine-ctn+s" / "seed2", [(1, 0.32, 0.22), (2, 0.36, 0.26)])
    logged(runs / "binary-ctn" / "seed1", [(1, 0.70, 0.75), (2, 0.80, 0.85), (3, 0.81, 0.90)])
    md = tmp_path / "docs" / "results.md"
    md.parent.mkdir()
    report(runs, md, tmp_path / "docs" / "results.json", "scripts/paper/table2.sh --epochs 3")

    lines = (tmp_path / "docs" / "img" / "table2-curves.tsv").read_text().splitlines()
    assert lines[0] == "# epoch\tfine-ctn+s dev\tfine-ctn+s train\tbinary-ctn dev\tbinary-ctn train"
    # The fine cell stops where its shorter run stops.
    assert lines[1:] == ["1\t31.00\t21.00\t70.00\t75.00", "2\t35.00\t25.00\t80.00\t85.00", "3\t?\t?\t81.00\t90.00"]


def test_a_cell_whose_runs_are_gone_keeps_its_curve_and_a_new_cell_gains_one(tmp_path):
    img = tmp_path / "docs" / "img"
    img.mkdir(parents=True)
    # An earlier report's curves, from runs this machine no longer has.
    (img / "table2-curves.tsv").write_text("# epoch\tfine-ctn dev\tfine-ctn train\n1\t39.00\t42.00\n2\t41.50\t48.00\n")
    runs = tmp_path / "runs"
    finished_run(runs / "fine-tree-lstm" / "seed1", 0.46)
    (runs / "fine-tree-lstm" / "seed1" / "metrics.jsonl").write_text(
        json.dumps({"epoch": 1.0, "dev_root_accuracy": 0.45, "train_root_accuracy": 0.51}) + "\n")
    records = report(runs, tmp_path / "docs" / "results.md", tmp_path / "docs" / "results.json", "table2.sh")
    assert records[("fine", "tree-lstm")]["paper"] == 51.0  # Tai, Socher and Manning's figure
    lines = (img / "table2-curves.tsv").read_text().splitlines()
    assert lines == ["# epoch\tfine-ctn dev\tfine-ctn train\tfine-tree-lstm dev\tfine-tree-lstm train",
                     "1\t39.00\t42.00\t45.00\t51.00", "2\t41.50\t48.00\t?\t?"]


def test_fine_runs_read_as_binary_make_the_folded_cell(tmp_path):
    runs = tmp_path / "runs"
    finished_run(runs / "fine-ctn+s" / "seed1", 0.46, final=(50, 0.47))
    finished_run(runs / "fine-ctn+s" / "seed2", 0.45)
    finished_run(runs / "fine-ctn+s" / "seed3", 0.44)
    # pens eval RUN --task binary's output, as table2.sh writes it; seed 3 not yet read.
    for seed, accuracy in ((1, 86.25), (2, 85.75)):
        (runs / "fine-ctn+s" / f"seed{seed}" / "binary-test.txt").write_text(
            f"runs/fine-ctn+s/seed{seed}/best.model.json on SST test (binary task, the fine-grained model's "
            "probabilities folded, 1821 roots, 26052 labeled nodes), mean of 50 subspace draws:\n"
            f"  root accuracy {accuracy:.2f}%\n  all-node accuracy 87.10%\n")
    records = report(runs, tmp_path / "results.md", tmp_path / "results.json", "table2.sh --methods ctn+s")
    folded = records[("binary", "ctn+s-fine-folded")]
    assert (folded["accuracies"], folded["seeds"], folded["mean"], folded["test_draws"]) == \
        ([86.25, 85.75], [1, 2], 86.0, [50, 50])
    assert folded["paper"] == 87.8 and folded["config_sha256"] == records[("fine", "ctn+s")]["config_sha256"]
    assert records[("fine", "ctn+s")]["accuracies"] == [47.0, 45.0, 44.0]  # the fine cell is the fine runs'
    assert "| CTN+S, fine read as binary | - | - | 86.00 ± 0.35 | 87.8 | -/2 |" in (tmp_path / "results.md").read_text()
    # An evaluation that failed part way names its file.
    (runs / "fine-ctn+s" / "seed3" / "binary-test.txt").write_text("pens: error: ...\n")
    failed = subprocess.run([sys.executable, str(ROOT / "scripts" / "paper" / "results_trees.py"), str(runs),
                             str(tmp_path / "results.md"), str(tmp_path / "results.json"), "x"],
                            capture_output=True, text=True)
    assert failed.returncode != 0 and "seed3/binary-test.txt has no root accuracy" in failed.stderr


def test_new_seeds_of_the_same_cell_join_its_record_and_another_config_replaces_it(tmp_path):
    results, md = tmp_path / "results.json", tmp_path / "results.md"
    first = tmp_path / "machine1"
    finished_run(first / "fine-ctn+s+pea" / "seed1", 0.46)
    finished_run(first / "fine-ctn+s+pea" / "seed2", 0.47)
    config = {"optimizer": {"kind": "adagrad", "learning_rate": 0.01}, "run": {"epochs": 150}}
    (first / "fine-ctn+s+pea" / "config.json").write_text(json.dumps(config))
    report(first, md, results, "table2.sh --epochs 150 --seeds 1,2")

    # Seed 3 on a machine that no longer has seeds 1 and 2: the same config (laid out
    # otherwise, on more threads, with a budget: neither changes a run), so it joins the record.
    second = tmp_path / "machine2"
    finished_run(second / "fine-ctn+s+pea" / "seed3", 0.45)
    (second / "fine-ctn+s+pea" / "config.json").write_text(
        json.dumps({**config, "run": {**config["run"], "threads": 2, "budget_minutes": 30}}, indent=4))
    joined = report(second, md, results, "table2.sh --epochs 150 --seeds 3")[("fine", "ctn+s+pea")]
    assert (joined["seeds"], joined["accuracies"], joined["runs"], joined["mean"], joined["std"]) == \
        ([1, 2, 3], [46.0, 47.0, 45.0], 3, 46.0, 1.0)
    assert joined["minutes"] == [10.0, 10.0, 10.0] and "superseded" not in joined
    assert joined["command"] == "table2.sh --epochs 150 --seeds 1,2; table2.sh --epochs 150 --seeds 3"

    # Another config (a longer run) for seed 4: not the same cell's runs, so it replaces the record.
    third = tmp_path / "machine3"
    finished_run(third / "fine-ctn+s+pea" / "seed4", 0.48)
    (third / "fine-ctn+s+pea" / "config.json").write_text(json.dumps({**config, "run": {"epochs": 400}}))
    replaced = report(third, md, results, "table2.sh --epochs 400 --seeds 4")[("fine", "ctn+s+pea")]
    assert replaced["seeds"] == [4] and replaced["superseded"][0]["seeds"] == [1, 2, 3]


def test_recorded_lists_the_seeds_of_records_made_with_the_cells_config_and_no_others(tmp_path):
    """What table2.sh does not run again on a machine whose runs folder lost them."""
    results, md = tmp_path / "results.json", tmp_path / "results.md"
    first = tmp_path / "machine1"
    config = {"optimizer": {"kind": "adagrad", "learning_rate": 0.01}, "run": {"epochs": 150}}
    for seed, accuracy in ((1, 0.46), (2, 0.47)):
        finished_run(first / "fine-ctn" / f"seed{seed}", accuracy)
        (first / "fine-ctn" / f"seed{seed}" / "binary-test.txt").write_text("root accuracy 85.0%\n")
    (first / "fine-ctn" / "config.json").write_text(json.dumps(config))
    finished_run(first / "binary-ctn" / "seed1", 0.8)
    (first / "binary-ctn" / "config.json").write_text(json.dumps(config))
    report(first, md, results, "table2.sh --epochs 150")

    def recorded(runs):
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "paper" / "results_trees.py"), "--recorded",
                              str(runs), str(results)], check=True, capture_output=True, text=True).stdout
        return out.split()

    second = tmp_path / "machine2"  # the cells' files written again, their runs gone
    (second / "fine-ctn").mkdir(parents=True)
    (second / "fine-ctn" / "config.json").write_text(json.dumps({**config, "run": {"epochs": 150, "threads": 1}}))
    (second / "binary-ctn").mkdir()
    (second / "binary-ctn" / "config.json").write_text(json.dumps({**config, "run": {"epochs": 400}}))
    # Not the folded cell's runs (they are the fine cell's), not binary-ctn's (another config).
    assert recorded(second) == ["fine-ctn/seed1", "fine-ctn/seed2"]
    # A record without a fingerprint cannot be matched to a config, so its seeds run again.
    records = json.loads(results.read_text())
    for r in records:
        r.pop("config_sha256", None)
    results.write_text(json.dumps(records))
    assert recorded(second) == []
