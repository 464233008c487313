"""The one error the package raises for bad input."""

from __future__ import annotations

from attnviz.i18n import ID_PATTERN, Message


class AttnvizInputError(ValueError):
    """An argument or a piece of user input is not usable.

    The message names the argument (or the row and column of matrix text) and says what is
    wrong, in words a learner understands; pages show it with ``st.error``.

    Raised with a message id and its parameters, ``AttnvizInputError("error.attentions.not_4d",
    ndim=3, shape=(2, 3, 3))``, the text is rendered when read: ``str(exc)`` is in the active
    language (English unless an app session or ``use_language`` says otherwise), so an error
    raised in one place is shown in the language of the page that shows it. ``exc.message`` is
    the :class:`~attnviz.i18n.Message` (id and parameters), ``exc.render(lang)`` the
    text in a given language. A plain sentence (a module not converted yet) still works and is
    shown as written.
    """

    def __init__(self, message: str, /, **params) -> None:
        self.message = Message(message, **params) if ID_PATTERN.fullmatch(message) else None
        self._text = None if self.message is not None else message
        super().__init__(message)

    @property
    def msg_id(self) -> str | None:
        return self.message.msg_id if self.message is not None else None

    @property
    def params(self) -> dict:
        return dict(self.message.params) if self.message is not None else {}

    def render(self, lang: str | None = None) -> str:
        return self._text if self.message is None else self.message.render(lang)

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self):
        return _rebuild, (type(self), self.args[0], self.params)


def _rebuild(cls, message: str, params: dict) -> AttnvizInputError:
    return cls(message, **params)


class OverflowInStep(AttnvizInputError):
    """A step's numbers overflow (``error.overflow.<step>``): `step` names it as
    ``trace.steps`` does ("scores", "z", …), so the app can find which edited cells make it
    overflow and say so."""

    def __init__(self, step: str) -> None:
        super().__init__(f"error.overflow.{step}")
        self.step = step

    def __reduce__(self):
        return type(self), (self.step,)
