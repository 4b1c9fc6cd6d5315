def main() -> None:
    raise SystemExit("not implemented yet")


if __name__ == "__main__":
    main()
