"""The one error of configuration: a setting, option or parameter that cannot be used as given."""


class SettingsError(ValueError):
    """A setting (environment variable or argument) has a value that cannot be used."""
