"""Settings of the serving runtime (paper Section 4.4 / Appendix D): one frozen
:class:`ServingSettings`; ``from_env`` reads the ``TEMPO_*`` variables once and raises
ValueError naming the variable, so a bad setting fails the server at start-up.

Variables (default in brackets):

- ``TEMPO_PARAMS``: cost parameters, a named set of ``data/params/cost_params.csv`` (Tables 6-7)
  or a calibration ``fit.json`` (or its folder), optionally ``#three_term|tile|max_affine`` [``proxy-serving``]
- ``TEMPO_POLICY``: a servable policy, ``tempo`` or ``token_lp`` (Section 5.12's control) [``tempo``]
- ``TEMPO_REFRESH_MS``: refresh period [200]
- ``TEMPO_DEADLINE_MS``: most a solve may take [150]
- ``TEMPO_TOPOLOGY``: ``flat`` or ``hier`` (per-source-node tables, Section 4.3) [``flat``]
- ``TEMPO_GPUS_PER_NODE``: GPUs per node; required with ``hier`` [--]
- ``TEMPO_SOLVER_WORKERS``: solver processes, layers split among them [1]
- ``TEMPO_PRICING``: ``step`` (counts / forward steps in the window), ``window`` (one batch),
  ``fixed`` (rescaled to ``TEMPO_BATCH_TOKENS``) [``step``]
- ``TEMPO_BATCH_TOKENS``: token-expert pairs per batch for ``fixed`` pricing [--]
- ``TEMPO_SOLVER``: ``process`` (Section 4.4), ``thread`` (Section 5.11's control), ``noop``
  (never solve; set by ``tempo_noop``) [``process``]
- ``TEMPO_MAX_MISSES``: deadlines a worker may miss in a row before it is replaced [3]
- ``TEMPO_STARTUP_TIMEOUT_S``: seconds the solver's compiled code may take to build before serving [900]
- ``TEMPO_WARMUP_TIMEOUT_S``: seconds a worker may go without CPU progress before ready [20]
- ``TEMPO_STALE_WINDOWS``: windows with traffic and no new table before a warning [25]
- ``TEMPO_AGREE_EVERY``: forward steps between table agreements (rank-invariant dispatch) [8]
- ``TEMPO_RECORDER_BUFFER_CAP``: cap (steps) of SGLang's recorder buffer in tempo runs [off]
- ``TEMPO_SGLANG_ANY_VERSION``: ``1`` skips the SGLang version check [0]
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

TOPOLOGIES = ("flat", "hier")
PRICINGS = ("step", "window", "fixed")
#: where tables are solved (:func:`tempo.serving.solver.make_solver`)
SOLVERS = ("process", "thread", "noop")
#: seconds the solver's compiled code may take to build before serving starts.  A cold numba
#: compile of the solver (empty cache) took 38 s on this artifact's 2-core CPU machine under a
#: load of 4-6 (``make bench --cold-compile`` prints it) and more than 180 s under a load of
#: about 27; a build that stops progressing is ended sooner (WARMUP_TIMEOUT_S).
STARTUP_TIMEOUT_S = 900.0
#: seconds a worker may make no progress before it is ready (the compiled code is built
#: before workers start, so a worker only loads it: seconds)
WARMUP_TIMEOUT_S = 20.0
#: the cost-model forms a calibration's fit.json holds (tempo/calib/record.py), most complete first
FIT_FORMS = ("three_term", "tile", "max_affine", "max_affine_no_intercept")
#: the most bytes a fit.json may hold (calibrate writes about 1 KB)
MAX_FIT_BYTES = 2**20


def servable_policies() -> tuple[str, ...]:
    """The policies ``TEMPO_POLICY`` accepts: every registered policy whose spec says
    ``servable`` (:func:`tempo.policies.select`), in the registry's order."""
    from ..policies import select

    return tuple(select(servable=True))


def load_fit(spec: str):
    """A :class:`~tempo.core.cost.CostModel` from a calibration fit (``python -m tempo calibrate``
    writes ``<recording>/fit.json``: each form's parameters and fit error).  ``spec`` is the
    file or its folder, optionally followed by ``#form``; without a form the most complete one
    fitted is used (``three_term``: Eq. 4 with the traffic term, then ``tile``: Eq. 2, then
    ``max_affine``: Eq. 1).  Errors name ``TEMPO_PARAMS``."""
    from ..core.cost import CostModel
    from ..core.io import read_json
    from ..measured.catalog import check_fits

    path_s, _, form = str(spec).partition("#")
    path = Path(path_s).expanduser()
    if path.is_dir():
        path = path / "fit.json"
    try:  # a regular file of bounded size and depth (a link is followed: the user named it)
        fits = read_json(path, MAX_FIT_BYTES, str(path), follow=True)
    except FileNotFoundError:
        raise ValueError(f"TEMPO_PARAMS: {path} does not exist (give a named parameter set, or the fit.json "
                         f"of a recording from `python -m tempo calibrate`, or its folder)") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"TEMPO_PARAMS: {exc}") from None
    if not isinstance(fits, dict) or not any(isinstance(fits.get(f), dict) and "params" in fits[f] for f in FIT_FORMS):
        raise ValueError(f"TEMPO_PARAMS: {path} is not a calibration fit.json (no fitted form among "
                         f"{', '.join(FIT_FORMS)})")
    try:  # every form: parameters that make a cost model (the checks ingest makes)
        check_fits(fits, str(path))
    except ValueError as exc:
        raise ValueError(f"TEMPO_PARAMS: {path} has unusable parameters ({exc})") from None
    if form:
        if form not in fits:
            raise ValueError(f"TEMPO_PARAMS: {path} has no fitted form {form!r}; it has {', '.join(fits)}")
    else:
        form = next(f for f in FIT_FORMS if f in fits)
    p = fits[form]["params"]
    return CostModel(a=p.get("a", 0.0), b=p["b"], c=p.get("c", 0.0), beta=p["beta"], b2=p.get("b2", 0.0),
                     c2=p.get("c2"), gamma=p.get("gamma"), name=f"{path.parent.name}#{form}")


def cost_model(params: str):
    """The CostModel ``TEMPO_PARAMS`` names: a named set, or a calibration fit (:func:`load_fit`)."""
    from ..core.cost import CostModel
    from ..core.params import params_table

    if params in params_table().index:
        return CostModel.named(params)
    looks_like_path = os.sep in params or params.endswith(".json") or "#" in params or Path(params).exists()
    if looks_like_path:
        return load_fit(params)
    raise ValueError(f"TEMPO_PARAMS: unknown parameter set {params!r}; known: {', '.join(params_table().index)}, "
                     f"or the path of a fit.json from `python -m tempo calibrate`")


@dataclass(frozen=True)
class ServingSettings:
    params: str = "proxy-serving"
    policy: str = "tempo"
    refresh_ms: float = 200.0
    deadline_ms: float = 150.0
    topology: str = "flat"
    gpus_per_node: int | None = None
    solver_workers: int = 1
    pricing: str = "step"
    batch_tokens: int | None = None
    solver: str = "process"
    max_misses: int = 3
    agree_every: int = 8
    recorder_buffer_cap: int | None = None
    any_version: bool = False
    startup_timeout_s: float = STARTUP_TIMEOUT_S
    warmup_timeout_s: float = WARMUP_TIMEOUT_S
    stale_windows: int = 25

    def __post_init__(self):
        def bad(name, msg):
            raise ValueError(f"{name} ({_ENV[name]}) {msg}")

        if self.policy not in servable_policies():
            bad("policy", f"must be one of {servable_policies()}, got {self.policy!r}")
        if self.topology not in TOPOLOGIES:
            bad("topology", f"must be one of {TOPOLOGIES}, got {self.topology!r}")
        if self.pricing not in PRICINGS:
            bad("pricing", f"must be one of {PRICINGS}, got {self.pricing!r}")
        if self.solver not in SOLVERS:
            bad("solver", f"must be one of {SOLVERS}, got {self.solver!r}")
        for name in ("refresh_ms", "deadline_ms", "startup_timeout_s", "warmup_timeout_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and v < float("inf")):
                bad(name, f"must be a positive finite number, got {v!r}")
        for name in ("solver_workers", "max_misses", "agree_every", "stale_windows"):
            if int(getattr(self, name)) < 1:
                bad(name, f"must be >= 1, got {getattr(self, name)!r}")
        for name in ("gpus_per_node", "batch_tokens", "recorder_buffer_cap"):
            v = getattr(self, name)
            if v is not None and int(v) < 1:
                bad(name, f"must be >= 1 when set, got {v!r}")
        if self.topology == "hier" and self.gpus_per_node is None:
            bad("gpus_per_node", "must be set with topology 'hier' (TEMPO_TOPOLOGY=hier)")
        if self.pricing == "fixed" and self.batch_tokens is None:
            bad("batch_tokens", "must be set with pricing 'fixed' (TEMPO_PRICING=fixed)")
        if self.batch_tokens is not None and self.pricing != "fixed":
            bad("batch_tokens", f"is only used with TEMPO_PRICING=fixed, but pricing is {self.pricing!r}")
        if not isinstance(self.params, str) or not self.params:
            bad("params", f"must be a parameter-set name or a fit.json path, got {self.params!r}")
        object.__setattr__(self, "_model", cost_model(self.params))  # a bad name or file fails here, at start-up

    def cost_model(self):
        """The :class:`~tempo.core.cost.CostModel` the solver prices with (``TEMPO_PARAMS``)."""
        return self._model

    @property
    def interval_s(self) -> float:
        return self.refresh_ms / 1e3

    @property
    def deadline_s(self) -> float:
        return self.deadline_ms / 1e3

    def n_nodes(self, ep_size: int) -> int | None:
        """Source nodes of ``hier`` tables for an EP group of ``ep_size`` GPUs (None: flat)."""
        if self.topology != "hier":
            return None
        if ep_size % self.gpus_per_node:
            raise ValueError(f"gpus_per_node (TEMPO_GPUS_PER_NODE) = {self.gpus_per_node} does not divide "
                             f"the EP size {ep_size}")
        return ep_size // self.gpus_per_node

    @classmethod
    def from_env(cls, env=None) -> "ServingSettings":
        """Read the ``TEMPO_*`` variables of ``env`` (default ``os.environ``) once."""
        env = os.environ if env is None else env
        kw = {}
        for f in fields(cls):
            var = _ENV[f.name]
            raw = env.get(var)
            if raw is None or raw == "":
                continue
            kw[f.name] = _parse(var, raw, _KIND.get(f.name, str))
        return cls(**kw)


_ENV = {
    "params": "TEMPO_PARAMS", "policy": "TEMPO_POLICY", "refresh_ms": "TEMPO_REFRESH_MS",
    "deadline_ms": "TEMPO_DEADLINE_MS", "topology": "TEMPO_TOPOLOGY", "gpus_per_node": "TEMPO_GPUS_PER_NODE",
    "solver_workers": "TEMPO_SOLVER_WORKERS", "pricing": "TEMPO_PRICING", "batch_tokens": "TEMPO_BATCH_TOKENS",
    "solver": "TEMPO_SOLVER", "max_misses": "TEMPO_MAX_MISSES", "agree_every": "TEMPO_AGREE_EVERY",
    "recorder_buffer_cap": "TEMPO_RECORDER_BUFFER_CAP", "any_version": "TEMPO_SGLANG_ANY_VERSION",
    "startup_timeout_s": "TEMPO_STARTUP_TIMEOUT_S", "warmup_timeout_s": "TEMPO_WARMUP_TIMEOUT_S",
    "stale_windows": "TEMPO_STALE_WINDOWS",
}
_KIND = {"refresh_ms": float, "deadline_ms": float, "gpus_per_node": int, "solver_workers": int,
         "batch_tokens": int, "max_misses": int, "agree_every": int, "recorder_buffer_cap": int,
         "any_version": bool, "startup_timeout_s": float, "warmup_timeout_s": float, "stale_windows": int}


def _parse(var: str, raw: str, kind):
    if kind is bool:
        if raw not in ("0", "1"):
            raise ValueError(f"{var} must be 0 or 1, got {raw!r}")
        return raw == "1"
    if kind is int:
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{var} must be an integer, got {raw!r}") from None
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f"{var} must be a number, got {raw!r}") from None
    return raw
