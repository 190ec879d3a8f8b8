"""New objects from uncorrelated observations: tracklets per sensor pass (:mod:`.tracklets`), then
initial orbits, joint fits linking passes and candidates for a provisional number (:mod:`.search`)."""
