"""The lakehouse and its engine: the Spark Connect server every stage runs on (:mod:`.server`), client
sessions (:mod:`.spark`), the Delta tables and their schemas (:mod:`.tables`, :mod:`.schemas`), the sensor
wire formats (:mod:`.wire_formats`), and the package zip shipped to cluster executors (:mod:`.dist`)."""
