"""scripts/paper/table1.sh as a campaign in several parts: killed in the middle of a run
and started again, it does not repeat the finished run, resumes the interrupted one from
its checkpoint, runs the rest, and records each cell as its runs finish, keeping the
records it did not measure."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, small_model

sys.path.insert(0, str(ROOT / "scripts" / "paper"))
import table1_methods  # noqa: E402  (the registry's reader, beside the scripts it serves)


def small_configs(tmp_path, name, labeled, epochs, steps_per_epoch, **extra):
    """A configs folder holding the small model and one config `name` for it on the small
    data set (16 + 16 rows a step, 1 thread); `extra` adds top-level sections."""
    configs = tmp_path / "configs"
    configs.mkdir()
    small_model().save(str(configs / "small.model.json"))
    (configs / name).write_text(json.dumps({
        "model": "small.model.json",
        "data": {"labeled": labeled, "validation": 100, "split_seed": 1},
        "batch": {"labeled": 16, "unlabeled": 16},
        "optimizer": {"learning_rate": 0.1},
        "run": {"epochs": epochs, "steps_per_epoch": steps_per_epoch, "seed": 3, "threads": 1},
        "eval": {"every_epochs": 1},
        **extra,
    }))
    return configs


def campaign(tmp_path, small_mnist, pens_binary, splits=3, epochs=200):
    """The table1.sh command of a PEA cell at 20 labels on the small data set, with its
    configs folder: by default 3 splits long enough (200 epochs of 10 steps, a checkpoint
    each epoch) to be interrupted between checkpoints."""
    configs = small_configs(tmp_path, "pea-20.json", 100, epochs, 10, checkpoint={"every_epochs": 1})
    return [str(ROOT / "scripts" / "paper" / "table1.sh"), "--methods", "pea", "--labels", "20", "--splits", str(splits),
            "--configs", str(configs), "--data-dir", str(small_mnist), "--pens", pens_binary,
            "--runs", str(tmp_path / "runs"), "--report", str(tmp_path / "report")]


def test_an_interrupted_campaign_resumes_without_repeating_finished_runs(tmp_path, small_mnist, pens_binary):
    command = campaign(tmp_path, small_mnist, pens_binary)
    runs = tmp_path / "runs" / "pea-20"
    # The record holds a cell measured elsewhere and a tree cell: both stay.
    (tmp_path / "report").mkdir()
    earlier = [{"method": "sde", "labels": 100, "splits": 5, "mean": 23.67, "std": 2.53, "errors": [23.67] * 5,
                "minutes": [2.4] * 5, "epochs": [40.0] * 5, "paper": 22.89, "command": "elsewhere"},
               {"task": "fine", "method": "ctn", "mean": 40.31}]
    (tmp_path / "report" / "results.json").write_text(json.dumps(earlier))

    # First part: killed, script and pens at once, once split 2 has a checkpoint.
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while not (runs / "split2" / "checkpoint.pens").exists():
        assert first.poll() is None, "table1.sh ended before split 2 wrote a checkpoint:\n" + first.stdout.read()
        assert time.monotonic() < deadline, "split 2 wrote no checkpoint in 300 s"
        time.sleep(0.02)
    os.killpg(first.pid, signal.SIGKILL)
    first_output = first.communicate()[0]
    assert "table1: 0 of 3 runs done; remaining: pea-20/split1 pea-20/split2 pea-20/split3" in first_output
    assert "table1: 1 of 3 runs done; remaining: pea-20/split2 pea-20/split3" in first_output
    assert not (runs / "split2" / "summary.json").exists(), "split 2 finished before the kill: make it longer"
    finished_split1 = (runs / "split1" / "summary.json").read_bytes()
    # Split 1's cell was recorded when it finished, before the interruption.
    cells = [r for r in json.loads((tmp_path / "report" / "results.json").read_text()) if r.get("method") == "pea"]
    assert [(c["labels"], c["splits"]) for c in cells] == [(20, 1)]

    # Second part: the same command.
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    out = second.stdout
    assert "table1: 1 of 3 runs done; remaining: pea-20/split2 (resumes) pea-20/split3" in out
    assert "table1: pea-20/split1 already finished" in out
    assert (runs / "split1" / "summary.json").read_bytes() == finished_split1
    resumed_command = next(line for line in out.splitlines() if "--out" in line and "/split2" in line)
    assert resumed_command.endswith("--resume")
    assert "resuming from" in (runs / "split2" / "train.log").read_text()
    assert "table1: 3 of 3 runs done; remaining: none" in out

    # Split 2's evaluations: each epoch once, in order, across the two parts.
    steps = [json.loads(line)["step"] for line in (runs / "split2" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [10 * e for e in range(1, 201)]
    for split in (2, 3):
        summary = json.loads((runs / f"split{split}" / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["steps"] == 2000
    record = json.loads((tmp_path / "report" / "results.json").read_text())
    cells = [r for r in record if r.get("method") == "pea"]
    assert [(c["labels"], c["splits"]) for c in cells] == [(20, 3)]
    assert earlier[0] in record and earlier[1] in record
    # The recorded command is the one to type afresh, without the second part's --resume.
    assert "--resume" not in cells[0]["command"]
    assert "| pea | 20 | 3 |" in (tmp_path / "report" / "results-history.md").read_text()
    # The tables page is drawn from the record (no Table 1 column has 20 labels: empty cells).
    assert "## Table 1 and its successors: semi-supervised MNIST" in (tmp_path / "report" / "results.md").read_text()


def test_a_cell_grows_by_split_over_campaigns_whose_runs_folders_are_gone(tmp_path):
    """results.py keeps a cell's recorded splits that the runs folder lacks, adds the splits
    it finds, and replaces a recorded split the folder holds again."""
    runs = tmp_path / "runs"
    for seed, error, minutes in ((2, 0.0251, 70.5), (3, 0.0233, 69.0)):
        run = runs / "pea-authors-600" / f"split{seed}"
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps({
            "status": "finished", "test_error": error, "wall_seconds": 60 * minutes, "epochs": 600.0,
            "best_validation": {"epoch": 590.0, "test_error": error, "validation_error": 0.03}}))
        (run / "command.txt").write_text(
            f"runs/table1/pens train examples/mnist/pea-authors.json --out runs/table1/pea-authors-600/split{seed} "
            f"--labels 600 --split-seed {seed} --threads 1\n")
    # Split 1 from an earlier campaign (no runs folder left), and a split 3 the folder replaces.
    earlier = [{"method": "pea-authors", "labels": 600, "splits": 2, "split_seeds": [1, 3], "errors": [2.24, 9.0],
                "mean": 5.62, "std": 4.78, "minutes": [80.89, 1.0], "epochs": [600.0, 600.0],
                "best_validation_epochs": [592.0, 1.0], "paper": 2.44,
                "notes": {"1": "shared the cores with builds", "3": "a run since redone"},
                "command": "build/pens train examples/mnist/pea-authors.json --split-seed S --out "
                           "runs/table1/pea-authors-600/splitS"}]
    md, record = tmp_path / "results.md", tmp_path / "results.json"
    record.write_text(json.dumps(earlier))
    subprocess.run(["python3", str(ROOT / "scripts" / "paper" / "results.py"), str(runs), str(md), str(record)], check=True)
    [c] = json.loads(record.read_text())
    assert c["split_seeds"] == [1, 2, 3]
    assert c["errors"] == [2.24, 2.51, 2.33]
    assert c["minutes"] == [80.89, 70.5, 69.0]
    assert c["best_validation_epochs"] == [592.0, 590.0, 590.0]
    assert c["mean"] == round((2.24 + 2.51 + 2.33) / 3, 3) and c["splits"] == 3
    assert c["commands"][0] == ("build/pens train examples/mnist/pea-authors.json --split-seed 1 --out "
                                "runs/table1/pea-authors-600/split1")
    assert c["commands"][2].startswith("build/pens train examples/mnist/pea-authors.json --out "
                                       "runs/table1/pea-authors-600/split3 --labels 600 --split-seed 3")
    assert "--split-seed S" in c["command"] and "/splitS" in c["command"]
    assert c["notes"] == {"1": "shared the cores with builds"}  # the note of the replaced split 3 is gone
    # Recorded again from the same runs, a split keeps a note written beside it.
    c["notes"]["2"] = "beside another run"
    record.write_text(json.dumps([c]))
    subprocess.run(["python3", str(ROOT / "scripts" / "paper" / "results.py"), str(runs), str(md), str(record)], check=True)
    assert json.loads(record.read_text()) == [c]
    assert "| pea-authors | 600 | 3 | 2.36 ± 0.14 | 2.44 | -0.08 |" in md.read_text()
    assert "(S = 1, 2, 3)" in md.read_text()


def test_a_campaign_runs_its_runs_jobs_at_a_time(tmp_path, small_mnist, pens_binary):
    command = campaign(tmp_path, small_mnist, pens_binary, splits=2, epochs=3)
    out = subprocess.run(command + ["--jobs", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "table1: 2 of 2 runs done; remaining: none" in out.stdout
    runs = tmp_path / "runs" / "pea-20"
    threads = max(1, len(os.sched_getaffinity(0)) // 2)
    for split in (1, 2):
        assert json.loads((runs / f"split{split}" / "summary.json").read_text())["status"] == "finished"
        assert f" --threads {threads} " in (runs / f"split{split}" / "command.txt").read_text()
    [cell] = [r for r in json.loads((tmp_path / "report" / "results.json").read_text()) if r.get("method") == "pea"]
    assert cell["split_seeds"] == [1, 2]
    bad = subprocess.run(command + ["--jobs", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--jobs takes a positive integer" in bad.stderr


def test_split_seeds_runs_only_the_splits_it_names(tmp_path, small_mnist, pens_binary):
    command = campaign(tmp_path, small_mnist, pens_binary, epochs=2)
    out = subprocess.run(command + ["--split-seeds", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "table1: 0 of 1 runs done; remaining: pea-20/split2" in out.stdout
    runs = tmp_path / "runs" / "pea-20"
    assert sorted(p.name for p in runs.iterdir()) == ["split2"]
    assert " --split-seed 2 " in (runs / "split2" / "command.txt").read_text()
    [cell] = [r for r in json.loads((tmp_path / "report" / "results.json").read_text()) if r.get("method") == "pea"]
    assert cell["split_seeds"] == [2]
    bad = subprocess.run(command + ["--split-seeds", "1,x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--split-seeds takes positive integers, got '1,x'" in bad.stderr


def test_a_split_recorded_by_an_earlier_campaign_whose_folder_is_gone_is_not_run_again(
        tmp_path, small_mnist, pens_binary):
    command = campaign(tmp_path, small_mnist, pens_binary, splits=2, epochs=2)
    (tmp_path / "report").mkdir()
    split1 = {"method": "pea", "labels": 20, "splits": 1, "split_seeds": [1], "mean": 7.5, "std": 0.0,
              "errors": [7.5], "minutes": [3.0], "epochs": [2.0], "paper": None,
              "command": "build/pens train pea-20.json --out runs/table1/pea-20/splitS --split-seed S",
              "notes": {"1": "on another machine"}}
    (tmp_path / "report" / "results.json").write_text(json.dumps([split1]))
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "table1: 1 of 2 runs done; remaining: pea-20/split2" in out.stdout
    assert "table1: pea-20/split1 already recorded in" in out.stdout
    runs = tmp_path / "runs" / "pea-20"
    assert not (runs / "split1").exists()
    assert json.loads((runs / "split2" / "summary.json").read_text())["status"] == "finished"
    [cell] = [r for r in json.loads((tmp_path / "report" / "results.json").read_text()) if r.get("method") == "pea"]
    assert cell["split_seeds"] == [1, 2]
    assert cell["errors"][0] == 7.5 and cell["notes"] == {"1": "on another machine"}
    # Its folder made, the split runs again and its run replaces the recorded one.
    (runs / "split1").mkdir()
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "table1: 1 of 2 runs done; remaining: pea-20/split1" in again.stdout
    summary = json.loads((runs / "split1" / "summary.json").read_text())
    [cell] = [r for r in json.loads((tmp_path / "report" / "results.json").read_text()) if r.get("method") == "pea"]
    assert cell["errors"][0] == round(100 * summary["test_error"], 3) and "notes" not in cell


def test_the_authors_pea_plus_pretrains_once_then_fine_tunes_each_split_from_it(tmp_path, small_mnist, pens_binary):
    command = campaign(tmp_path, small_mnist, pens_binary, splits=2)
    configs = tmp_path / "configs"
    (configs / "pretrain-authors.json").write_text(json.dumps({
        "model": "small.model.json",
        "layers": [{"node": "a1", "corruption": [{"kind": "mask", "p": 0.25, "rescale": 0}], "sparsity": 0.2,
                    "weight_noise": 0.01, "epochs": 2}],
        "batch": 25,
        "optimizer": {"learning_rate": 0.02, "warmup_epochs": 1, "momentum_start": 0.5, "momentum_end": 0.9,
                      "momentum_epochs": 2},
        "run": {"steps_per_epoch": 5, "threads": 1},
    }))
    fine_tuning = json.loads((configs / "pea-20.json").read_text())
    fine_tuning["run"]["epochs"] = 3
    fine_tuning["lambda_schedule"] = [{"epochs": 1, "scale": 0, "trainable": ["W2", "b2"]},
                                      {"epochs": 2, "scale": 1, "restart": True}]
    (configs / "pea-plus-authors.json").write_text(json.dumps(fine_tuning))
    command[command.index("--methods") + 1] = "pea+-authors"
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("pens pretrain") == 1
    runs = tmp_path / "runs"
    assert json.loads((runs / "pretrain-authors" / "summary.json").read_text())["status"] == "finished"
    for split in (1, 2):
        command_line = (runs / "pea+-authors-20" / f"split{split}" / "command.txt").read_text()
        assert f"--init {runs / 'pretrain-authors' / 'model.json'}" in command_line
    [cell] = [r for r in json.loads((tmp_path / "report" / "results.json").read_text())
              if r.get("method") == "pea+-authors"]
    assert cell["split_seeds"] == [1, 2] and cell["labels"] == 20


def test_the_curves_of_the_runs_found_join_the_curves_of_runs_whose_folders_are_gone(tmp_path):
    """results.py writes img/table1-curves.tsv beside the history: each finished run's
    validation and test error by epoch from its metrics.jsonl (a resumed run's repeated
    epoch counted once, its last), and the columns of an earlier report whose runs are gone."""
    runs = tmp_path / "runs"
    run = runs / "ladder-anneal-24-1000" / "split2"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "finished", "test_error": 0.0105,
                                                  "wall_seconds": 600.0, "epochs": 3.0}))
    evaluations = [(1, 0.08, 0.081), (2, 0.05, 0.052), (2, 0.04, 0.042), (3, 0.011, 0.0105)]
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"epoch": float(e), "step": 10 * e, "validation_error": v, "test_error": t}) + "\n"
        for e, v, t in evaluations) + json.dumps({"epoch": 3.0, "objective": 1.5}) + "\n")
    unfinished = runs / "ladder-anneal-24-1000" / "split3"
    unfinished.mkdir()
    (unfinished / "summary.json").write_text(json.dumps({"status": "running"}))
    (unfinished / "metrics.jsonl").write_text(json.dumps({"epoch": 1.0, "validation_error": 0.5, "test_error": 0.5}))
    img = tmp_path / "img"
    img.mkdir()
    (img / "table1-curves.tsv").write_text(
        "# epoch\tvat-ema-long-100 split1 validation\tvat-ema-long-100 split1 test\n1\t9.50\t9.70\n2\t?\t?\n")
    md, record = tmp_path / "results.md", tmp_path / "results.json"
    subprocess.run(["python3", str(ROOT / "scripts" / "paper" / "results.py"), str(runs), str(md), str(record)], check=True)
    assert (img / "table1-curves.tsv").read_text().splitlines() == [
        "# epoch\tvat-ema-long-100 split1 validation\tvat-ema-long-100 split1 test"
        "\tladder-anneal-24-1000 split2 validation\tladder-anneal-24-1000 split2 test",
        "1\t9.50\t9.70\t8.00\t8.10",
        "2\t?\t?\t4.00\t4.20",
        "3\t?\t?\t1.10\t1.05",
    ]
    # scripts/setup.sh installs gnuplot, which draws them.
    assert (img / "table1-curves.png").read_bytes().startswith(b"\x89PNG")


def test_records_measured_run_by_run_are_rows_of_their_own_table(tmp_path):
    """Consistency records written by hand (kind "consistency") are kept as they are and
    listed in a table of their own beside Table 1's."""
    record = tmp_path / "results.json"
    md = tmp_path / "results.md"
    vat = {"kind": "consistency", "method": "vat", "variant": "averaged weights", "labels": 100, "splits": 2,
           "split_seeds": [1, 2], "errors": [1.79, 1.9], "mean": 1.845, "std": 0.078, "minutes": [21.5, 15.2],
           "published": 1.36, "note": "two splits", "command": "build/pens train examples/mnist/vat-bn-ema-100.json"}
    record.write_text(json.dumps([vat]))
    subprocess.run(["python3", str(ROOT / "scripts" / "paper" / "results.py"), str(tmp_path / "none"), str(md), str(record)],
                   check=True)
    assert json.loads(record.read_text()) == [vat]
    assert "| vat | averaged weights | 100 | 2 | 1.84 ± 0.08 | 1.36 | +0.48 | 18.4 |" in md.read_text()


def test_a_supervised_cell_runs_one_split_per_validation_seed(tmp_path, small_mnist, pens_binary):
    """--supervised-splits N: the fully supervised cell's runs hold out the validation
    images of split seeds 1..N, and its record has N splits."""
    configs = small_configs(tmp_path, "sde-supervised.json", 0, 2, 5)
    command = [str(ROOT / "scripts" / "paper" / "table1.sh"), "--labels", "", "--supervised",
               "--supervised-methods", "sde", "--supervised-splits", "2", "--configs", str(configs),
               "--data-dir", str(small_mnist), "--pens", pens_binary, "--runs", str(tmp_path / "runs"),
               "--report", str(tmp_path / "report")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "remaining: sde-supervised/split1 sde-supervised/split2" in done.stdout
    validation_sets = []
    for split in (1, 2):
        run = tmp_path / "runs" / "sde-supervised" / f"split{split}"
        assert f"--split-seed {split}" in (run / "command.txt").read_text()
        assert json.loads((run / "summary.json").read_text())["status"] == "finished"
        validation_sets.append(next(line for line in (run / "train.log").read_text().splitlines()
                                    if line.startswith("split ")))
    # Each a split of its own: the log's line names the seed.
    assert validation_sets[0].startswith("split 1:") and validation_sets[1].startswith("split 2:")
    [cell] = [r for r in json.loads((tmp_path / "report" / "results.json").read_text()) if r.get("method") == "sde"]
    assert cell["splits"] == 2


def test_every_registered_method_names_a_config_that_exists():
    """The registry (scripts/paper/table1-methods.json) is where table1.sh finds a method's
    config: each method that trains semi-supervised names a file of examples/mnist at every
    label count of Table 1, and its fully supervised config and its pre-training, where it
    has them, are configs there too."""
    assert len(set(table1_methods.NAMES)) == len(table1_methods.NAMES), "a method registered twice"
    for entry in table1_methods.METHODS:
        if "supervised" in entry:
            config = table1_methods.config(entry["method"], "supervised")
            assert (ROOT / "examples" / "mnist" / config).is_file(), f"{entry['method']} supervised: no {config}"
        if "config" not in entry:
            continue
        for labels in (100, 600, 1000, 3000):
            config = table1_methods.config(entry["method"], labels)
            assert (ROOT / "examples" / "mnist" / config).is_file(), f"{entry['method']} at {labels}: no {config}"
        if "pretrained" in entry:
            assert (ROOT / "examples" / "mnist" / f"{entry['pretrained']}.json").is_file()
    # pea-authors has a recipe of its own at 100 labels, pea a config per label count.
    assert table1_methods.config("pea-authors", 100) == "pea-authors-100.json"
    assert table1_methods.config("pea-authors", 600) == "pea-authors.json"
    assert table1_methods.config("pea", 600) == "pea-600.json"
    # What table1.sh reads: the config and the pre-training, tab-separated.
    plan = subprocess.run([sys.executable, str(ROOT / "scripts" / "paper" / "table1_methods.py"), "plan", "pea+", "1000"],
                          capture_output=True, text=True, check=True)
    assert plan.stdout == "pea-plus-1000.json\tpretrain\n"


def test_a_malformed_registry_is_refused_with_what_is_wrong(tmp_path):
    registry = tmp_path / "table1-methods.json"
    registry.write_text('[\n  {"method": "sde", "config": "sde-semi.json" "family": "SDE"}\n]\n')
    with pytest.raises(SystemExit, match=r"table1-methods.json: not valid JSON at line 2, column 47: Expecting"):
        table1_methods.read(registry)
    registry.write_text(json.dumps([{"method": "sde", "family": "SDE", "about": "dropout"}, {"method": "pea"}]))
    with pytest.raises(SystemExit, match=r"entry 2 \(pea\) has no family, about"):
        table1_methods.read(registry)


def test_a_campaign_with_an_unknown_method_stops_before_running_and_says_which(tmp_path, small_mnist, pens_binary):
    for method, why in (("sde,no-such-method", "unknown method no-such-method"),
                        ("raw", "raw runs fully supervised only")):
        done = subprocess.run([str(ROOT / "scripts" / "paper" / "table1.sh"), "--methods", method, "--labels", "20",
                               "--data-dir", str(small_mnist), "--pens", pens_binary, "--runs", str(tmp_path / "runs"),
                               "--report", str(tmp_path / "report")], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and why in done.stderr, done.stdout + done.stderr
        assert not list((tmp_path / "runs").glob("*/split*")), "a run started before the plan was checked"
    # A fully supervised cell needs the registry's "supervised" config: VAT has none.
    done = subprocess.run([str(ROOT / "scripts" / "paper" / "table1.sh"), "--labels", "", "--supervised",
                           "--supervised-methods", "sde,vat", "--data-dir", str(small_mnist), "--pens", pens_binary,
                           "--runs", str(tmp_path / "runs"), "--report", str(tmp_path / "report")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "vat has no fully supervised config" in done.stderr, done.stdout + done.stderr
    assert not list((tmp_path / "runs").glob("*/split*")), "a run started before the plan was checked"
