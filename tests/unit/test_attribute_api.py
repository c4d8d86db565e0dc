"""The case object and ``attribute``: every method on one case, one cache, honest costs."""

from __future__ import annotations

import numpy as np
import pytest

import mechrag
from mechrag import BetaShapley, Case, KernelSHAP
from mechrag.attribution.estimators import ESTIMATORS
from mechrag.attribution.shapley import exact_shapley

QUERY = "Where does Ana live?"
DOCS = ["Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold.", "Cy is tall."]


@pytest.fixture
def case(tiny_llama):
    return Case(tiny_llama, QUERY, DOCS, "Oslo.")


def test_arc_jsd_through_attribute_matches_direct_call(tiny_llama, case):
    ours = case.attribute("arc_jsd")
    direct = mechrag.arc_jsd(tiny_llama, QUERY, DOCS, "Oslo.")
    np.testing.assert_allclose(ours.scores, direct.scores)
    np.testing.assert_allclose(ours.token_scores, direct.token_scores)


def test_arc_jsd_then_loo_adds_no_pass_and_exact_scores_only_new_subsets(case):
    engine = case.engine
    case.arc_jsd()
    passes, rows = engine.forward_passes, engine.rows_scored
    loo = case.attribute("loo")
    assert engine.forward_passes == passes and engine.rows_scored == rows
    assert loo.model_calls == 5 and loo.forward_passes == 0
    exact = case.attribute("exact")
    assert engine.rows_scored - rows == 2**4 - 5  # only the subsets not seen yet
    assert exact.model_calls == 16 and case.subsets_scored == 16
    again = case.attribute("exact")
    assert again.forward_passes == 0
    np.testing.assert_array_equal(again.scores, exact.scores)


def test_loo_and_exact_match_the_game(case):
    game = case.game("logprob")
    np.testing.assert_allclose(case.attribute("exact").scores, exact_shapley(game, 4))
    full = game(case.full_mask()[None])[0]
    np.testing.assert_allclose(
        case.attribute("loo").scores, full - game(case.leave_one_out_masks())
    )


@pytest.mark.parametrize("method", sorted(ESTIMATORS))
def test_budgets_and_per_token_scores(case, method):
    budget = None if method in ("exact", "loo") else 10
    result = case.attribute(method, budget=budget, value="token_prob", seed=1)
    assert result.token_scores.shape == (4, len(case.response_ids))
    np.testing.assert_allclose(result.scores, result.token_scores.sum(1))
    assert result.model_calls <= {"exact": 16, "loo": 5}.get(method, 10)
    assert result.method == method and result.metadata["value"] == "token_prob"


def test_configured_estimator_objects(case):
    paired = case.attribute(KernelSHAP(paired=True), budget=10, seed=3)
    defaults = {"interactions": 1, "ridge": 0.01}
    assert paired.metadata["options"] == {"paired": True, **defaults}
    assert case.attribute("kernel_shap").metadata["options"] == {"paired": False, **defaults}
    shapley_weights = case.attribute(BetaShapley(alpha=1.0), budget=10, seed=3)
    default = case.attribute("beta", budget=10, seed=3)
    assert shapley_weights.metadata["options"]["alpha"] == 1.0
    assert not np.allclose(shapley_weights.scores, default.scores)  # the option reached it


def test_string_response_is_tokenised_as_a_continuation(tiny_llama):
    from mechrag.models.toy import tiny_model

    # A space-marker tokenizer splits " Oslo" differently alone than after the prompt.
    model = tiny_model("llama", prefix_space=True)
    case = Case(model, QUERY, DOCS, "Oslo.")
    alone = model.tokenizer("Oslo.", add_special_tokens=False).input_ids
    joint = model.tokenizer(case.builder.text() + "Oslo.", add_special_tokens=False).input_ids
    assert case.response_ids != alone
    assert joint == case.builder.ids() + case.response_ids
    assert case.response_text == "Oslo."


def test_bad_inputs(case):
    with pytest.raises(ValueError, match="unknown method"):
        case.attribute("shap")
    with pytest.raises(ValueError, match="arc_jsd scores"):
        case.attribute("arc_jsd", budget=10)
    with pytest.raises(ValueError, match="masks must be"):
        case.token_logprobs(np.ones((2, 3), dtype=bool))
    with pytest.raises(ValueError, match="unknown divergence"):
        case.token_divergences(case.leave_one_out_masks(), "hellinger")
    with pytest.raises(ValueError, match="unknown source"):
        case.localize("nope")


def test_reuse_scored_gives_the_arc_jsd_subsets_free(case):
    """After ARC-JSD, ``reuse_scored`` hands its n + 1 subsets (the full context and the
    leave-one-out subsets) to the estimator as known rows: the result is the estimator run with
    those rows, and the budget counts only new subsets."""
    case.arc_jsd()
    scored = case.scored_masks()
    assert len(scored) == 5 and scored[0].all()
    rows = case.engine.rows_scored
    result = case.attribute(mechrag.LeverageSHAP(), budget=6, reuse_scored=True)
    new = case.engine.rows_scored - rows
    assert 0 < new <= 6 and result.model_calls == len(scored) + new
    game = case.game("logprob")
    known = (scored, game(scored))
    expected = mechrag.shapley_values(game, 4, "leverage_shap", 6, known=known)
    np.testing.assert_allclose(result.scores, expected)
    alone = case.attribute(mechrag.LeverageSHAP(), budget=6)
    assert not np.allclose(alone.scores, result.scores)  # the free rows changed the estimate


@pytest.mark.parametrize("method", ["tmc", "leverage_shap"])
def test_reuse_scored_on_a_fresh_case_changes_nothing(tiny_llama, method):
    """Before any pass nothing is scored, so there is nothing to reuse."""
    results = [
        Case(tiny_llama, QUERY, DOCS, "Oslo.").attribute(method, budget=6, reuse_scored=reuse)
        for reuse in (False, True)
    ]
    np.testing.assert_array_equal(results[0].scores, results[1].scores)
    assert results[0].model_calls == results[1].model_calls <= 6
    assert results[0].forward_passes == results[1].forward_passes


def _parameters(function) -> set[str]:
    import inspect

    return set(inspect.signature(function).parameters) - {"self"}


def test_one_liners_take_every_option_of_the_case_methods():
    """``mechrag.arc_jsd(...)`` and friends accept whatever ``Case(...)`` and the case method
    they stand for accept (``mechrag.arc_jsd(..., screen=5)`` used to be a TypeError)."""
    case_options = _parameters(Case.__init__) - {"example"}
    assert _parameters(mechrag.arc_jsd) >= case_options | _parameters(Case.arc_jsd)
    assert _parameters(mechrag.attribute) >= case_options | _parameters(Case.attribute)
    assert _parameters(mechrag.localize) >= case_options | _parameters(Case.localize)


def test_one_liner_passes_the_screen_and_template_on(tiny_llama, case):
    screened = mechrag.arc_jsd(tiny_llama, QUERY, DOCS, "Oslo.", screen=2)
    assert screened.method == "arc_jsd_screened"
    np.testing.assert_allclose(screened.scores, case.arc_jsd(screen=2).scores)
    brief = "Be brief."
    kl = mechrag.arc_jsd(tiny_llama, QUERY, DOCS, "Oslo.", divergence="kl", system_prompt=brief)
    plain = Case(tiny_llama, QUERY, DOCS, "Oslo.", system_prompt=brief).arc_jsd("kl")
    np.testing.assert_allclose(kl.scores, plain.scores)


def test_method_objects_are_the_case_methods(case):
    """A configured method called on a case is what ``case.attribute`` runs; its fields hold the
    only defaults, and ``case.attribute``'s settings replace them."""
    np.testing.assert_array_equal(mechrag.ARCJSD()(case).scores, case.arc_jsd().scores)
    direct = KernelSHAP(paired=True, budget=8, seed=3)(case)
    through = case.attribute(KernelSHAP(paired=True), budget=8, seed=3)
    np.testing.assert_array_equal(direct.scores, through.scores)
    assert direct.metadata["options"] == {"paired": True, "interactions": 1, "ridge": 0.01}
    assert KernelSHAP(seed=3).with_settings(seed=None, budget=5) == KernelSHAP(seed=3, budget=5)
    with pytest.raises(mechrag.errors.InputError, match="arc_jsd scores the n"):
        case.attribute("arc_jsd", budget=8)
    # ARC-JSD is deterministic and always reuses the cache: a seed changes nothing (as before).
    seeded = case.attribute("arc_jsd", seed=3, reuse_scored=True)
    np.testing.assert_array_equal(seeded.scores, case.arc_jsd().scores)


def test_every_registered_method_runs_by_name_and_names_itself(case):
    fast = ["hierarchical", "attention", "proxy"]
    assert list(mechrag.METHODS) == ["arc_jsd", *fast, *ESTIMATORS, "query_overlap"]
    # The two that need a setting on a tiny model: weights to read, a proxy to run.
    settings = {"attention": {"weights": "fitted"}, "proxy": {"proxy": case.model}}
    for name, method_class in mechrag.METHODS.items():
        assert method_class.name == name and method_class.description
        if name in settings:
            method = method_class(**settings[name])
            expected = "proxy_arc_jsd" if name == "proxy" else name
        else:
            budget = None if name in ("arc_jsd", "exact", "loo", "query_overlap", *fast) else 8
            method, expected = method_class().with_settings(budget=budget), name
        if name == "attention":
            with pytest.raises(ValueError, match="no fitted attention weights"):
                case.attribute(method)
            continue
        assert case.attribute(method).method == expected
    with pytest.raises(ValueError, match="choose from \\('arc_jsd', 'hierarchical'"):
        case.attribute("shap")


def test_the_sweep_registry_reads_the_method_registry():
    """Every attribution method is a sweep method, taking the case options, ``evaluate`` (its
    faithfulness in the record) and its fields."""
    from mechrag.sweep import SWEEP_METHODS

    assert set(mechrag.METHODS) < set(SWEEP_METHODS)
    case_options = {"max_new_tokens", "system_prompt", "evaluate"}
    assert set(SWEEP_METHODS["arc_jsd"].options) == case_options | {"divergence", "screen"}
    settings = {"budget", "seed", "value"}
    assert set(SWEEP_METHODS["kernel_shap"].options) == case_options | settings | {
        "paired",
        "interactions",
        "ridge",
    }
    contextcite = set(SWEEP_METHODS["contextcite"].options)
    assert contextcite == case_options | settings | {"keep_prob", "l1"}


def test_overlap_counts_the_querys_content_words_in_each_source_without_a_pass(tiny_llama):
    """Counted by hand: "Where does Ana live in Oslo?" has content words {ana, live, oslo}
    ("where", "does", "in" are function words); "lives" is not "live"."""
    sources = ["Ana lives in Oslo.", "Where is it?", "Oslo: ana's live home.", "Cy is tall."]
    case = Case(tiny_llama, "Where does Ana live in Oslo?", sources, "Oslo.")
    result = case.attribute("query_overlap")
    np.testing.assert_array_equal(result.scores, [2, 0, 3, 0])
    assert result.forward_passes == 0 and result.model_calls == 0
    assert case.engine.forward_passes == 0
    with pytest.raises(mechrag.errors.InputError, match="query_overlap reads only the text"):
        case.attribute("query_overlap", budget=8)
