"""Field lists of Kafka messages kafka-python ships no schema for, in the JSON form its ``ApiMessage``
classes load (``load_json``), written from Kafka's public message specification."""
