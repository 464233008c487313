"""The one error the package raises for bad input."""


class AttnvizInputError(ValueError):
    """An argument or a piece of user input is not usable.

    The message names the argument (or the row and column of matrix text) and says what is
    wrong, in words a learner understands; pages show it with ``st.error``.
    """
