"""
Damped steps of q(v) towards the optimal q(v) of its own sites, for a bound whose sites move with
q(v) (VIConcave's ELBO): each step is a move in natural parameters by ρ = 1, ½, ¼, … towards the
site target of the q(v) it starts from, taken where the ELBO does not fall. The loop is one
``tf.while_loop`` whose body makes one pass over the data, so the pass is traced once; what a
pass is (in memory or over a stream, which sites it keeps) is the caller's ``evaluate``.
"""

from typing import Any, Callable, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from ..types import SiteStatistics
from .natural import (
    NaturalParameters,
    WhitenedQ,
    natural_parameters,
    natural_step,
    q_from_natural,
    site_target,
)

MAX_HALVINGS = 12
"""The most times a step halves its size ρ (from 1 down to 2⁻¹²) looking for one that does not
lower the ELBO; if none does, q(v) stays where it is and the steps end."""

ROUND_OFF = 1e-10
"""A step is taken if it lowers the ELBO by at most this much relative to ``max(1, |ELBO|)``: by
no more than the rounding of a sum over the data."""

Evaluation = Tuple[tf.Tensor, Optional[SiteStatistics], Any]
"""What one pass gives of a q(v): its ELBO, its sites' statistics, and whatever else the caller
keeps of the pass (in memory, the sites themselves). Where the statistics are ``None`` the steps
form them from what was kept, only for a q(v) they step on from (:func:`ascend`)."""


class Fallback(NamedTuple):
    """
    A second candidate start of :func:`ascend`, evaluated only where it may be the better one:
    where the first start's ELBO is below :attr:`sufficient`. VIConcave's steps from the sites
    of an accepted iterate take the stored q(u) as theirs (:class:`~gpflow_fastvi.VIConcave`'s
    ``_stepped_sites``): the first start, the optimal q(u) of those sites, is a whole step, which
    can lie below the stored q(u) where the steps settle slowly (C classes).
    """

    q: WhitenedQ
    """The second start."""
    sufficient: tf.Tensor
    """The ELBO at or above which the first start makes this one needless; ``+inf`` to evaluate
    it always."""
    known: Optional[Tuple[tf.Tensor, Callable[[], Tuple[tf.Tensor, SiteStatistics, Any]]]]
    """(whether, evaluation): where that holds, this start's evaluation, computed without a
    pass, which the first start must then beat."""


def nest_stop_gradient(structure: Any) -> Any:
    """``tf.stop_gradient`` on every tensor of a nest (a projection, site statistics)."""
    return tf.nest.map_structure(tf.stop_gradient, structure)


def ascend(
    start: WhitenedQ,
    num_updates: int,
    evaluate: Callable[[WhitenedQ], Evaluation],
    statistics: Callable[[Any], SiteStatistics],
    held: Any,
    to_family: Callable[[WhitenedQ], WhitenedQ],
    fallback: Optional[Fallback] = None,
    settled: Optional[float] = None,
) -> Tuple[WhitenedQ, Any]:
    """
    ``num_updates`` steps from the better of ``start`` and, where it is needed, the ``fallback``
    start (each q(v) one N(m_l, R_l R_lᵀ) per latent function, as one batch); returns the q(v)
    reached and what ``evaluate`` kept with it (``held`` is its shape before the first turn),
    both held fixed for the gradient.

    One loop, one pass over the data (``evaluate``: the ELBO of a q, its sites' statistics, and
    whatever else the caller keeps of the pass) per turn. Where a pass keeps the sites and gives
    no statistics (the data in memory), ``statistics`` forms them from what it kept, only for a q
    taken that a later turn steps on from: an N·M² product per latent function saved on every
    trial not taken and on the last step. The first turn evaluates ``start``; the next the
    fallback, unless its evaluation is known (:attr:`Fallback.known`) or ``start`` reached
    :attr:`Fallback.sufficient`, and keeps the start of higher ELBO (``start`` in a tie within
    :data:`ROUND_OFF`). Every later turn evaluates a step from the q last taken, by ρ = 2⁻ʰ after
    h halvings, towards the optimal q for that q's sites (their natural parameters, the
    ``target``, batched over the latent functions; one ρ for all of them, as the ELBO is one
    sum), brought into the model's family by ``to_family``. A trial whose ELBO is not lower (by
    more than :data:`ROUND_OFF`) is taken, and the next step starts at ρ = 1; otherwise ρ halves.
    When :data:`MAX_HALVINGS` halvings find no such ρ, the steps end where they are: every later
    step would try the same directions from the same q. So the q returned has an ELBO at least
    that of every start evaluated, to round-off. With ``settled``, a step taken that raised the
    ELBO by no more than ``settled`` relative to ``max(1, |ELBO|)`` is the last.
    """
    one = tf.ones((), dtype=start.m.dtype)
    starts = [start] if fallback is None else [start, fallback.q]
    candidates = tf.nest.map_structure(lambda *ts: tf.stack(ts), *starts)
    first = -len(starts)  # the turns before the steps, one per start
    known = None if fallback is None else fallback.known
    # Whether the fallback's evaluation is known before the first turn: its turn is then
    # skipped, as where the first start's ELBO reaches ``sufficient``.
    fallback_known = tf.constant(False) if known is None else known[0]

    def trial(q: WhitenedQ, target: NaturalParameters, halvings: tf.Tensor) -> WhitenedQ:
        rho = tf.pow(0.5 * one, tf.cast(halvings, one.dtype))
        return to_family(q_from_natural(natural_step(natural_parameters(q), target, rho)))

    def turn(
        steps: tf.Tensor,
        halvings: tf.Tensor,
        q: WhitenedQ,
        elbo: tf.Tensor,
        target: NaturalParameters,
        held: Any,
    ) -> Any:
        is_start = steps < 0
        q_try = tf.cond(
            is_start,
            lambda: tf.nest.map_structure(lambda t: t[steps - first], candidates),
            lambda: trial(q, target, halvings),
        )
        elbo_try, stats_try, held_try = evaluate(q_try)
        tolerance = ROUND_OFF * tf.maximum(one, tf.abs(elbo))
        taken = elbo_try >= elbo - tolerance
        if fallback is not None:
            # The fallback replaces the first start only where it is better beyond round-off:
            # in a tie the first start stays, as where the fallback's evaluation is known
            # and the first start is the one that must beat it.
            beats = elbo_try > elbo + tolerance
            taken = tf.where(tf.equal(steps, first + 1), beats, taken)
        ended = ~taken & (halvings >= MAX_HALVINGS)  # stuck: no ρ raises the ELBO
        if settled is not None:  # a step taken that barely raised the ELBO is the last
            gain = elbo_try - elbo
            ended |= taken & ~is_start & (gain <= settled * tf.maximum(one, tf.abs(elbo)))
        moved_on = (taken | is_start) & ~ended  # every start is evaluated once, taken or not
        advance = 1
        if fallback is not None:
            needless = fallback_known | (elbo_try >= fallback.sufficient)
            advance = tf.where(tf.equal(steps, first) & needless, 2, 1)
        steps = tf.where(moved_on, steps + advance, tf.where(ended, num_updates, steps))
        halvings = tf.where(moved_on, 0, halvings + 1)
        keep = lambda new, old: tf.where(taken, new, old)  # noqa: E731
        if stats_try is None:
            # The statistics of the sites kept, formed only where a later turn steps on from
            # this q: a trial not taken, and the last step, need none.
            target = tf.cond(
                taken & (steps < num_updates),
                lambda: site_target(statistics(held_try), one),
                lambda: target,
            )
        else:
            target = tf.nest.map_structure(keep, site_target(stats_try, one), target)
        held = tf.nest.map_structure(keep, held_try, held)
        q = tf.nest.map_structure(keep, q_try, q)
        return steps, halvings, q, keep(elbo_try, elbo), target, held

    # Before the first turn nothing is evaluated: ELBO −∞ (the first start is taken), unless
    # the fallback's evaluation is known, which the first start must then beat.
    q = start
    not_yet = NaturalParameters(eta1=tf.zeros_like(q.m), precision=tf.zeros_like(q.R))
    elbo = tf.constant(-np.inf, one.dtype)
    target = not_yet
    if fallback is not None and known is not None:
        evaluation = known[1]

        def taken() -> Any:
            known_elbo, stats, known_held = evaluation()
            return fallback.q, known_elbo, site_target(stats, one), known_held

        q, elbo, target, held = tf.cond(fallback_known, taken, lambda: (start, elbo, target, held))
    begin = (tf.constant(first), tf.constant(0), q, elbo, target, held)
    _, _, q, _, _, held = tf.while_loop(lambda steps, *_: steps < num_updates, turn, begin)
    return nest_stop_gradient(q), nest_stop_gradient(held)
