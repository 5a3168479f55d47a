"""The draft lengths' budget (app.core.speculative.budget) on hand-made costs and acceptances."""

from __future__ import annotations

import pytest

from app.core.speculative.budget import EXPLORE_EVERY, GUESSED_SLOPE, DraftBudget, VerifyCost

#: This project's 2-core CPU with SmolLM2 (bench/speculative.py): a batch of m costs these one-token steps.
CPU_STEPS = {1: 1.0, 2: 1.22, 3: 1.80, 5: 2.59, 9: 4.16}


def cost_of(steps: dict[int, float], step_s: float = 0.02, capacity: int = 9) -> VerifyCost:
    cost = VerifyCost(capacity)
    for m, s in steps.items():
        for _ in range(3):
            cost.verified(m, s * step_s)
    return cost


def budget_with(cost: VerifyCost, rates: list[float], rounds: int = 200, draft_max: int = 8) -> DraftBudget:
    """A budget that has judged ``rounds`` rounds of draft_max tokens, position i accepted at ``rates[i]``
    given the ones before it (deterministically: accepted counts spread evenly)."""
    budget = DraftBudget(cost, draft_max)
    debt = [0.0] * draft_max
    for _ in range(rounds):
        accepted = 0
        for i in range(draft_max):
            debt[i] += rates[i] if i < len(rates) else 0.0
            if debt[i] >= 1.0:
                debt[i] -= 1.0
                accepted += 1
            else:
                break
        budget.judged(draft_max, accepted)
    return budget


def test_every_size_reads_the_line_fitted_to_the_medians():
    cost = cost_of(CPU_STEPS)
    # least squares through (1, 1) of (1, 0.22), (2, 0.80), (4, 1.59), (8, 3.16): slope 0.388
    slope = (0.22 + 2 * 0.80 + 4 * 1.59 + 8 * 3.16) / (1 + 4 + 16 + 64)
    assert cost.slope() == pytest.approx(slope, rel=1e-6)
    assert cost.verify_s(2) == pytest.approx(0.02 * (1 + slope))
    assert cost.verify_s(4) == pytest.approx(0.02 * (1 + 3 * slope))
    assert cost.steps()[:3] == pytest.approx((1.0, 1 + slope, 1 + 2 * slope))
    assert cost.steps()[3] == 0.0  # never timed
    assert cost.timings == 15


def test_a_noisy_size_cannot_make_a_longer_verification_cheaper():
    """Review of issue 22: 'Verifying 2 / 3 / 5 tokens costs 1.76 / 0.91 / 3.19 one-token steps' on a loaded
    CPU. Medians of the recent timings, and one line through them: costs rise with the size."""
    cost = VerifyCost(9)
    for t in (0.020, 0.021, 0.019, 0.090):  # one one-token round slowed by another process
        cost.verified(1, t)
    for m, t in ((2, 0.035), (3, 0.018), (5, 0.064)):
        cost.verified(m, t)
    assert cost.verify_s(1) == pytest.approx(0.0205)  # the median: the slow round does not count
    steps = [x for x in cost.steps() if x > 0]
    assert steps == sorted(steps) and steps[0] == 1.0


def test_before_a_batch_of_two_is_timed_the_slope_is_the_memory_bound_guess():
    cost = cost_of({1: 1.0})
    assert cost.slope() == GUESSED_SLOPE
    assert VerifyCost(9).steps() == ()


def test_the_first_round_is_a_plain_step_so_every_length_is_judged_against_a_measured_one():
    budget = DraftBudget(VerifyCost(9), 8)
    assert budget.length(8) == 0
    budget.cost.verified(1, 0.02)
    # the memory-bound guess (0.05 step per token) at the prior's 0.6: E(4) = 2.31 tokens for 1.2 steps is best
    assert budget.length(8) == 4


def test_low_acceptance_on_a_compute_bound_cpu_drafts_nothing():
    # chat on SmolLM2 (bench): 11 % of drafted tokens accepted
    budget = budget_with(cost_of(CPU_STEPS), [0.11] * 8)
    assert budget.length(8) == 0


def test_middling_acceptance_on_the_cpu_drafts_one_or_two_tokens():
    # code on SmolLM2 (bench): 68 / 56 / 52 / 46 % by position; one token: 1.68 tokens for 1.22 steps
    budget = budget_with(cost_of(CPU_STEPS), [0.68, 0.56, 0.52, 0.46, 0.42, 0.39, 0.45, 0.41])
    k = budget.length(8)
    assert 1 <= k <= 2
    speed = {j: budget.expected_tokens(j) / budget.cost.verify_s(j + 1) for j in range(0, 9)}
    assert max(speed, key=lambda j: speed[j]) == k


def test_the_same_acceptance_on_a_memory_bound_machine_drafts_the_whole_draft_max():
    gpu = cost_of({m: 1.0 + 0.02 * (m - 1) for m in CPU_STEPS})
    budget = budget_with(gpu, [0.68, 0.56, 0.52, 0.46, 0.42, 0.39, 0.45, 0.41])
    assert budget.length(8) >= 4  # positions past 5 are reached in under 4 % of rounds: they no longer pay
    assert budget.length(3) == 3  # never past the room given


def test_copying_on_the_cpu_drafts_long():
    budget = budget_with(cost_of(CPU_STEPS), [1.0] * 8)
    assert budget.length(8) == 8


def test_a_draft_model_as_slow_as_the_model_never_pays_on_the_cpu():
    # SmolLM2 Q4_1 drafting for its Q8_0: every token accepted, but each drafted token costs a step
    cost = cost_of(CPU_STEPS)
    for _ in range(5):
        cost.drafted(4, 4 * 0.02)
    assert cost.draft_s == pytest.approx(0.02)
    budget = budget_with(cost, [1.0] * 8)
    assert budget.length(8) == 0
    # ... and it never looks again: even a draft accepted whole would not pay; nor reads the prompt
    assert not budget.may_pay(8) and DraftBudget(VerifyCost(9), 8).may_pay(8)
    assert [budget.length(8) for _ in range(3 * EXPLORE_EVERY)] == [0] * (3 * EXPLORE_EVERY)


def test_after_many_skipped_rounds_one_round_drafts_a_single_token_to_look_again():
    budget = budget_with(cost_of(CPU_STEPS), [0.05] * 8)
    lengths = [budget.length(8) for _ in range(EXPLORE_EVERY)]
    assert lengths == [0] * (EXPLORE_EVERY - 1) + [1]


def test_acceptance_follows_the_reply_as_it_changes():
    budget = budget_with(cost_of(CPU_STEPS), [0.05] * 8)
    assert budget.length(8) == 0
    for _ in range(40):  # the reply starts copying its prompt
        budget.judged(8, 8)
    assert budget.length(8) == 8


def test_fixed_lengths_draft_what_there_is_room_for():
    budget = budget_with(cost_of(CPU_STEPS), [0.0] * 8)
    budget.adaptive = False
    assert budget.length(8) == 8 and budget.length(5) == 5 and budget.length(0) == 0
