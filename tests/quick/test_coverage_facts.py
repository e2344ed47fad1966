"""The facts file: what the yaml does not show, each fact for a range of torch releases."""

import pytest

from perfsuite.coverage.facts import (
    FactsError,
    coverage_note,
    facts_for_torch,
    holds_for,
    load_mps_facts,
    parse_mps_facts,
)


def minimal(**lists):
    return {"schema_version": 1, "checked_torch_versions": ["2.4.0", "2.13.0"], **lists}


@pytest.mark.parametrize("version, expected", [("2.7.1", True), ("2.8.0", False), ("2.4.0+cpu", True)])
def test_a_fact_holds_inside_its_range_only(version, expected):
    assert holds_for(">=2.4,<2.8", version) is expected


def test_a_development_build_counts_as_its_release():
    assert holds_for(">=2.14", "2.14.0.dev20260101+cpu")


def test_filtering_keeps_the_fallbacks_of_that_release():
    facts = parse_mps_facts(minimal(always_cpu_fallback=[
        {"op": "col2im", "torch_versions": ">=2.4,<2.8", "source": "MPSFallback.mm"},
        {"op": "linalg_svd", "torch_versions": ">=2.4", "source": "MPSFallback.mm"},
    ]))
    assert [f.op for f in facts_for_torch(facts, "2.13.0").always_cpu_fallback] == ["linalg_svd"]


def test_an_entry_without_a_source_is_rejected_with_its_name():
    with pytest.raises(FactsError, match=r"always_cpu_fallback\[0\] \(col2im\) lacks source"):
        parse_mps_facts(minimal(always_cpu_fallback=[{"op": "col2im", "torch_versions": ">=2.4"}]))


def test_a_bad_version_range_is_rejected_with_an_example():
    with pytest.raises(FactsError, match="'>=2.4,<2.8'"):
        parse_mps_facts(minimal(always_cpu_fallback=[{"op": "x", "torch_versions": "2.4+", "source": "s"}]))


def test_a_version_after_the_checked_releases_is_unchecked_naming_the_release_assumed():
    note = coverage_note(parse_mps_facts(minimal()), "2.15.0")
    assert note is not None and note.startswith("MPS fallback facts unchecked for torch 2.15.0: ")
    assert "assumed as in torch 2.13.0, the newest release read" in note


def test_a_version_before_the_checked_releases_may_miss_facts():
    note = coverage_note(parse_mps_facts(minimal()), "2.3.1")
    assert note is not None and "older than the oldest release whose MPS facts were read (2.4.0)" in note


def test_the_shipped_facts_are_unchecked_for_a_made_up_2_16():
    note = coverage_note(load_mps_facts(), "2.16.0")
    assert note is not None and "unchecked for torch 2.16.0" in note and "as in torch 2.15.0" in note


@pytest.mark.parametrize("version", ["2.13.0", "2.14.0", "2.14.1", "2.15.0"])
def test_the_shipped_facts_cover_the_releases_read(version):
    assert coverage_note(load_mps_facts(), version) is None


@pytest.mark.parametrize(("version", "svd_falls_back"), [("2.13.0", True), ("2.14.0", False), ("2.14.1", False),
                                                        ("2.15.0", False), ("2.16.0", False)])
def test_svd_always_falls_back_up_to_2_13_only(version, svd_falls_back):
    ops = {fact.op for fact in facts_for_torch(load_mps_facts(), version).always_cpu_fallback}
    assert ("linalg_svd" in ops, "linalg_svd.U" in ops) == (svd_falls_back, svd_falls_back)
    assert "embedding_renorm_" in ops


def test_a_checked_version_gets_no_note():
    assert coverage_note(parse_mps_facts(minimal()), "2.9.0") is None


def test_the_shipped_facts_file_is_valid_and_cites_a_source_for_every_entry():
    facts = load_mps_facts()
    entries = facts.always_cpu_fallback + facts.python_mps_kernels + facts.mps_choice_inside_composite
    assert entries and all(entry.source for entry in entries)


def test_torch_2_13_keeps_three_always_fallback_ops():
    # Read from the MPSFallback.mm registrations of the torch 2.13.0 macOS wheel.
    ops = {f.op for f in facts_for_torch(load_mps_facts(), "2.13.0").always_cpu_fallback}
    assert ops == {"embedding_renorm_", "linalg_svd", "linalg_svd.U"}


def test_torch_2_7_still_falls_back_for_col2im_and_3d_nearest_upsampling():
    ops = {f.op for f in facts_for_torch(load_mps_facts(), "2.7.1").always_cpu_fallback}
    assert {"col2im", "upsample_nearest3d.vec"} <= ops and "im2col" not in ops


def test_the_coverage_report_says_its_fallback_facts_are_unchecked_for_a_made_up_2_16():
    from perfsuite.coverage.assess import ModelCoverage
    from perfsuite.coverage.check import ModelReport
    from perfsuite.coverage.render import render_markdown, render_text

    note = coverage_note(load_mps_facts(), "2.16.0")
    report = ModelReport(ModelCoverage("resnet18", "smoke", 2, "cpu", "2.16.0", (), note))
    for rendered in (render_text([report], "none"), render_markdown([report], "none")):
        assert "MPS fallback facts unchecked for torch 2.16.0" in rendered.splitlines()[1]


def test_the_fallback_facts_and_the_release_facts_were_read_up_to_the_same_release():
    from perfsuite.coverage.facts import release_of
    from perfsuite.matrix.mps_support import NEWEST_TORCH_CHECKED, dotted

    newest_read = max(release_of(version) for version in load_mps_facts().checked_torch_versions)
    assert str(newest_read) == dotted(NEWEST_TORCH_CHECKED)
