"""Running replmon off Lambda: the real state machine under moto's interpreter, the template
reader, charts. Used by the CLI and the lab; not shipped in the Lambda layer."""
