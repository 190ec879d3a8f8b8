"""Configuration: every ``SDA_*`` setting, parsed and validated in one place (:mod:`.settings`), the
checks that keep path parameters inside the directories meant for them (:mod:`.paths`), and the one
error they raise (:mod:`.errors`). Standard library only: everything else imports this, it imports
nothing of ours outside itself."""
