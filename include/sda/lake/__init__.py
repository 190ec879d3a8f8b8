"""The lakehouse and its engine: the Spark Connect server every stage runs on (:mod:`.server`), client
sessions (:mod:`.spark`), the Delta tables (:mod:`.tables`, the registry) and their schemas (:mod:`.schemas`, one
module per layer), which orbit each object is used with (:mod:`.orbits`: the reads every stage picks it by), the
sensor wire formats (:mod:`.wire_formats`), and the package zip shipped to cluster executors (:mod:`.dist`)."""
