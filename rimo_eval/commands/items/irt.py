"""A two-parameter logistic (2PL) item response model of a runs x items matrix of 0/1 outcomes.

P(run r solves item i) = expit(a_i * (theta_r - b_i)): b_i is the item's difficulty, a_i its
discrimination, theta_r the run's ability, drawn from N(0, 1). Fitted by marginal maximum a
posteriori (Bock & Aitkin's EM over a fixed quadrature of theta), the estimator of BILOG and
mirt: with tens of runs a joint fit of every theta would be biased, and the priors keep the
items that no run (or every run) solved finite instead of running off to infinity.

Written on numpy/scipy rather than taken from py-irt (which needs torch and pyro) or girth (no
release since 2021, no standard errors): the model is 100 lines, and these are the textbook
equations. Standard errors come from the observed information of the M-step objective at the
optimum (the complete-data information, a slight under-statement of the uncertainty: Louis's
correction for the missing abilities is left out, as in girth and BILOG's default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit
from scipy.stats import norm

# theta's quadrature: 41 points on [-4, 4] under N(0, 1).
NODES = np.linspace(-4.0, 4.0, 41)
WEIGHTS = norm.pdf(NODES) / norm.pdf(NODES).sum()
# Priors of the M-step (slope-intercept form, logit = a * theta + c): a ~ N(1, 1), c ~ N(0, 3^2).
# Weak, but they bound items solved by no run or by all of them.
A_PRIOR, A_SD, C_SD = 1.0, 1.0, 3.0
Z95 = float(norm.ppf(0.975))


@dataclass(frozen=True)
class IrtFit:
    """The fit: per item a, b and their 95% Wald intervals; per run the EAP ability. When
    ``converged`` is False the numbers are not to be reported (``iterations`` says how far the
    EM got)."""

    converged: bool
    iterations: int
    discrimination: np.ndarray  # a_i
    discrimination_se: np.ndarray
    difficulty: np.ndarray  # b_i
    difficulty_se: np.ndarray
    ability: np.ndarray  # theta_r (EAP)
    outfit: np.ndarray  # outfit mean square per item (1 is a perfect fit)

    def interval(self, name: str, i: int) -> tuple[float, float]:
        value = getattr(self, name)[i]
        half = Z95 * getattr(self, f"{name}_se")[i]
        return float(value - half), float(value + half)


def _posterior(y: np.ndarray, a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """runs x nodes: each run's posterior over the quadrature nodes."""
    logit = np.outer(a, NODES) + c[:, None]  # items x nodes
    loglik = y @ log_expit(logit) + (1.0 - y) @ log_expit(-logit)  # runs x nodes
    loglik += np.log(WEIGHTS)
    loglik -= loglik.max(axis=1, keepdims=True)
    post = np.exp(loglik)
    return np.asarray(post / post.sum(axis=1, keepdims=True))


def _m_step(a: np.ndarray, c: np.ndarray, n_q: np.ndarray, r_iq: np.ndarray, steps: int = 3
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Newton steps on every item's expected log posterior at once; returns a, c and each
    item's 2 x 2 information matrix (negative Hessian) at the result."""
    x = NODES
    info = np.empty((len(a), 2, 2))
    for _ in range(steps):
        p = expit(np.outer(a, x) + c[:, None])
        resid = r_iq - n_q * p  # items x nodes
        w = n_q * p * (1.0 - p)
        grad_a = resid @ x - (a - A_PRIOR) / A_SD**2
        grad_c = resid.sum(axis=1) - c / C_SD**2
        info[:, 0, 0] = w @ (x * x) + 1.0 / A_SD**2
        info[:, 0, 1] = info[:, 1, 0] = w @ x
        info[:, 1, 1] = w.sum(axis=1) + 1.0 / C_SD**2
        step = np.linalg.solve(info, np.stack([grad_a, grad_c], axis=1)[..., None])[..., 0]
        # A damped step: the expected log posterior is concave, so a full Newton step only
        # overshoots on items far from their optimum; one of 2 logits at most.
        step = np.clip(step, -2.0, 2.0)
        a, c = a + step[:, 0], c + step[:, 1]
    return a, c, info


def fit_2pl(y: np.ndarray, max_iter: int = 500, tol: float = 1e-4) -> IrtFit:
    """Fit the 2PL model to ``y`` (runs x items, 0/1, no missing cells)."""
    y = np.asarray(y, dtype=float)
    if y.ndim != 2 or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("fit_2pl: need a runs x items matrix of 0 and 1")
    items = y.shape[1]
    a, c = np.ones(items), np.zeros(items)
    info = np.zeros((items, 2, 2))
    converged, iteration = False, 0
    for iteration in range(1, max_iter + 1):  # noqa: B007 (iterations are reported)
        post = _posterior(y, a, c)
        n_q, r_iq = post.sum(axis=0), y.T @ post
        new_a, new_c, info = _m_step(a, c, n_q, r_iq)
        change = max(float(np.abs(new_a - a).max()), float(np.abs(new_c - c).max()))
        a, c = new_a, new_c
        if not (np.isfinite(a).all() and np.isfinite(c).all()):
            break
        if change < tol:
            converged = True
            break
    post = _posterior(y, a, c)
    theta = post @ NODES
    cov = np.linalg.inv(info)  # per item, of (a, c)
    se_a = np.sqrt(np.maximum(cov[:, 0, 0], 0.0))
    # b = -c / a; its delta-method variance from (a, c)'s covariance.
    with np.errstate(divide="ignore", invalid="ignore"):
        b = -c / a
        grad = np.stack([c / a**2, -1.0 / a], axis=1)
        var_b = np.einsum("ij,ijk,ik->i", grad, cov, grad)
    p = expit(np.outer(theta, a) - (a * b)[None, :])  # runs x items, at the EAP abilities
    with np.errstate(divide="ignore", invalid="ignore"):
        outfit = np.mean((y - p) ** 2 / (p * (1.0 - p)), axis=0)
    return IrtFit(converged=converged, iterations=iteration, discrimination=a,
                  discrimination_se=se_a, difficulty=b, difficulty_se=np.sqrt(np.abs(var_b)),
                  ability=theta, outfit=outfit)


__all__ = ["IrtFit", "fit_2pl"]
