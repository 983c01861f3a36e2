"""The application's pieces that ``envcheck.api`` composes: the flows (``flows``: pure functions from
manifests, suite results and a policy to a ``Report``) and the streamed fleet diff (``fleet``)."""
