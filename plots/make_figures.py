"""make_figures.py DIR: draws every lesson's figures from DIR/lessonNN.csv into DIR."""
import glob
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klplot  # noqa: E402


def main(out_dir):
    for csv_path in sorted(glob.glob(os.path.join(out_dir, "lesson[0-9][0-9].csv"))):
        lesson = os.path.basename(csv_path)[:-4]
        module = importlib.import_module(lesson)
        for path in module.draw(klplot.read_rows(csv_path), out_dir):
            print("wrote", path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_figures.py RESULTS_DIR")
    main(sys.argv[1])
