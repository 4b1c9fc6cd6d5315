"""hello: the smallest app. Each public function in main.py is callable at /v4/<project>/hello/<function>."""


def run(name: str = "world") -> dict:
    return {"message": f"hello {name}"}
