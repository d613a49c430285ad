from .main import run

if __name__ == "__main__":   # not again in check --jobs workers, which import the main module
    run()
