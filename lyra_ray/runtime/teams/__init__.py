"""Teams on the live cluster, one sub-room: who they are and where that is kept
(:mod:`.store`), their owner and the rules of changing them (:mod:`.registry`), the
actor's calls (:mod:`.desk`), the policy behind the teams wrapper (:mod:`.policy`), the
team set one decision uses and each team's standing (:mod:`.sets`), and the exported
gauges (:mod:`.metrics`). Imports run one way: ``sets`` and ``store`` first, then
``registry`` and ``policy``, then ``desk`` and ``metrics``.
"""
