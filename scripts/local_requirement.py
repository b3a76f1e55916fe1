"""Print the llama-cpp-python requirement of pyproject.toml's ``local`` extra, so that
``make setup`` builds the version the package asks for (one place holds it)."""

import argparse
import pathlib

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the parser pip itself carries
    from pip._vendor import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> None:
    argparse.ArgumentParser(description=__doc__).parse_args()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    print(next(r for r in extras["local"] if r.lower().startswith("llama-cpp-python")))


if __name__ == "__main__":
    main()
