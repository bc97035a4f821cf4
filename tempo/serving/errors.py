"""Exceptions shared by the serving modules (kept here so that neither the refresher nor the
runtime has to import the other to name them)."""


class PeerStopped(RuntimeError):
    """A peer rank's refresher stopped: this rank's refresher stops after the same round."""


class AggregationUnavailable(RuntimeError):
    """The summed-window round could not run (a gloo timeout or a closed peer; the group is
    being rebuilt): the refresher solves from this rank's own window meanwhile."""
