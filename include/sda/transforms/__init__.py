"""Pure ``DataFrame -> DataFrame`` transforms of the observation path: the three sensor wire formats
checked and parsed (:mod:`.wire`) and the observation envelope built, validated and de-duplicated
(:mod:`.envelope`)."""
