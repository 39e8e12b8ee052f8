"""``prefixlab replay``: a scenario played on the simulator, every event in words."""

import re

from prefixlab.cli import main


def test_replay_builtin_design_doc_in_both_policies(capsys):
    assert main(["replay", "design-doc", "--policy", "classic"]) == 0
    classic = capsys.readouterr().out
    assert main(["replay", "design-doc"]) == 0
    vllm = capsys.readouterr().out
    assert "Block 4 is evicted" in classic and "Block 4 is evicted" not in vllm  # SPEC §7, step 6
    assert "line 7: request r0" in vllm and "free queue (head -> tail):" in vllm


def test_replay_takes_a_vllm_version_and_the_older_policy_spelling(capsys):
    assert main(["replay", "design-doc", "--vllm-version", "0.23"]) == 0
    v023 = capsys.readouterr().out
    assert main(["replay", "design-doc", "--policy", "classic"]) == 0
    unseeded = re.compile(r"hash [0-9a-f]{8}")  # 0.23 seeds its hashes at random, as vLLM 0.23 did
    assert unseeded.sub("", capsys.readouterr().out) == unseeded.sub("", v023) and "Block 4 is evicted" in v023
    assert main(["replay", "design-doc", "--vllm-version", "0.25"]) == 0
    assert "Block 4 is evicted" not in capsys.readouterr().out


def test_replay_reports_bad_files_and_bad_lines(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("blocks 5\nrequest a: x y\nfrobnicate\n")
    assert main(["replay", str(bad)]) == 2
    assert "Line 3" in capsys.readouterr().err
