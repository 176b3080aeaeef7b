"""Option letters: A for the first option, B for the second, as every benchmark here writes them."""


def option_letters(n_options: int) -> list[str]:
    return [chr(ord("A") + i) for i in range(n_options)]
