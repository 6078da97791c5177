"""The ``assumption`` of :class:`~skdiagatt.DiagAttClassifier`: individualized or multiple-instance.

Under ``assumption="standard-mil"`` the classifier keeps the DiagAtt scores
and replaces the value read-out by the multiple-instance read-out of
:mod:`skdiagatt.kernels.mil` (each head's presence logit is its offset plus a
smooth maximum of its instance scores; a bag is positive when every head
finds its concept).  This mixin only dispatches: the
parameters, the objective and the forward pass of that mode, and the
errors for what the mode does not define.
"""

import jax
import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ..kernels.mil import mil_logit, mil_loss
from ._mil_start import choose_mil_start, positive_share
from ._starts import at_most

__all__ = ["AssumptionMixin", "with_mil_rules"]

STANDARD_MIL = "standard-mil"


def _under_mil(est):
    return f"assumption={STANDARD_MIL!r}" if est._mil else None


def with_mil_rules(rules):
    """The inert-parameter ``rules`` plus those of this mode.

    It has no value vectors to penalize and heads that each score instances
    on their own.
    """
    heads = rules.get("exclusive_heads", lambda est: None)
    return {**rules, "alpha_value": _under_mil,
            "exclusive_heads": lambda est: heads(est) or _under_mil(est)}


class AssumptionMixin:
    """Mixin of DiagAttClassifier: the ``assumption`` parameter's dispatch.

    Placed before ``_DiagAttBase`` among the bases, it overrides the hooks
    that differ under ``assumption="standard-mil"`` and leaves everything
    else (training loop, whitening, prediction chunks, attention) shared.
    """

    @property
    def _mil(self):
        return self.assumption == STANDARD_MIL

    def _check_combination(self):
        super()._check_combination()
        if not self._mil:
            return
        # The refit acts on the value read-out, which this mode does not have.
        if self.value_refit:
            raise ValueError(
                "value_refit=True has no meaning under assumption='standard-mil' (a bag's "
                "logit comes from each head's instance scores, not from value vectors); "
                "set value_refit=False"
            )

    @property
    def _loss_fn(self):
        return mil_loss if self._mil else super()._loss_fn

    @property
    def _linear_predictor(self):
        return _mil_logit if self._mil else super()._linear_predictor

    @property
    def _calibrated(self):
        # No value vectors: calibration fits the heads' inverse temperatures
        # and the intercept to the same bag loss.
        return ("log_scale", "b") if self._mil else super()._calibrated

    @property
    def _held(self):
        # The evidence's scale is the bag logit's scale here: the main phase
        # needs it (with it held, the scores grow only through the penalized W, u).
        return () if self._mil else super()._held

    @property
    def intercept_(self):
        """Default mode: as in DiagAttRegressor.  "standard-mil": the heads' offsets, shape (n_heads,)."""
        if not self._mil:
            return super().intercept_
        check_is_fitted(self)
        return np.asarray(self.params_["b"], np.float64)

    def _init_params(self, d, t, rng):
        params = super()._init_params(d, t, rng)
        if not self._mil:
            return params
        V = params.pop("V")[..., 0]  # (R, d), drawn as in the default mode
        del params["log_sigma"]
        params["b"] = np.zeros(V.shape[0], np.float32)  # one offset per head
        # With V gone the heads start alike; the same small random draw in
        # their score parameters lets them specialise on different concepts.
        if "U" in params:
            params["U"] = V
        elif "W" in params:
            params["W"] = V[:, :, None] * np.eye(d, dtype=np.float32)
        return params

    def _data_constants(self, train):
        constants = super()._data_constants(train)
        if not self._mil:
            return constants
        # The pooling's sharpness is chosen with the start's instance scores
        # and fixed for the fit: it joins the constants (``sharpness_``).
        # Its own generator: the draws of the shared one stay those of the
        # other parts of the fit.
        rng = check_random_state(self.random_state)
        samples, Y, w = at_most(train.samples, np.asarray(train.Y, np.float64)[:, 0], train.weights, rng)
        starts = np.cumsum([0] + [len(x) for x in samples[:-1]])
        u, b, rho = choose_mil_start(np.concatenate(samples).astype(np.float64), starts, Y, w, random_state=rng)
        self._mil_start = u, b
        return {**constants, "sharpness": np.float32(rho)}

    def _start(self, params, train, c, S, rng):
        params = super()._start(params, train, c, S, rng)
        if not self._mil:
            return params
        u, b = self.__dict__.pop("_mil_start")
        if self.init == "zeros" or "U" not in params:
            # (score_form="quadratic" has no linear scores to start from.)
            # Zero scores pool to 0: b_r is set where every bag's P(y = 1) is
            # the share of positive bags, each head's sigmoid(b_r) its R-th root.
            w = np.ones(len(train.samples)) if train.weights is None else np.asarray(train.weights, np.float64)
            head = positive_share(np.asarray(train.Y, np.float64)[:, 0], w) ** (1.0 / len(params["b"]))
            params["b"] = np.full_like(params["b"], np.log(head / (1 - head)))
            return params
        # Head 0 starts at the chosen instance scores psi = u^T x: with
        # psi = s c (U S) x and s = 1 / tau at log_scale = 0, U = tau S^{-1} u / c.
        # The other heads start almost certain (b = 5): a bag's probability
        # is head 0's until they find a concept of their own.
        tau = self._temperature(S.shape[0])
        params["U"][0] = tau / float(c) * np.linalg.solve(np.asarray(S, np.float64), u)
        params["b"] = np.full_like(params["b"], 5.0)
        params["b"][0] = b
        return params

    def _frozen(self, constants, d):
        frozen = super()._frozen(constants, d)
        if self._mil:
            frozen["sharpness"] = constants["sharpness"]
        return frozen

    def _store_constants(self, constants):
        super()._store_constants(constants)
        if self._mil:
            self.sharpness_ = float(constants["sharpness"])

    def _fitted_constants(self):
        constants = super()._fitted_constants()
        return {**constants, "sharpness": np.float32(self.sharpness_)} if self._mil else constants

    def _binary_only(self, encoded):
        if self._mil and encoded[2] != "bernoulli":
            raise ValueError(
                f"assumption='standard-mil' needs exactly two classes, got {len(encoded[1])} "
                f"({list(encoded[1])}): bag evidence points towards one positive class "
                "(classes_[1]); for several classes fit one such classifier per class "
                "against the rest"
            )
        return encoded

    def _encode_targets(self, y, lengths, **kwargs):
        return self._binary_only(super()._encode_targets(y, lengths, **kwargs))

    def _internal_contributions(self, X):
        if self._mil:
            raise ValueError(
                "row_contributions and localize(by='contribution') are not defined under "
                "assumption='standard-mil': a bag's logit is not a sum of row terms; "
                "localize(by='attention') returns each head's highest-scoring instance"
            )
        return super()._internal_contributions(X)


_mil_logit = jax.jit(mil_logit)
