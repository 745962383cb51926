"""Lab 03 solved, then Part B's checkpoint swollen from inside the kernel: a 500 MB state file that takes no disk
where it is made (a sparse file), within what the grader reads of a checkpoint at all (bounds: 512 MB), but 500 MB
written to disk by whoever copies it, as Part B's cleanup check does, twice, in a checks process whose disk holds
1 GB. The check refuses a checkpoint far larger than the lab's query makes before copying anything: the student
loses that part's points, told why, and the grader copies nothing (without the refusal this submission would
pass the check at the cost of 1 GB of copies)."""

APPEND = '''
import os, pathlib
part_b = next((pathlib.Path(os.environ["STREAMLAB_DATA_DIR"]) / "checkpoints").glob("lab03-hdfs-*"))
with open(part_b / "state" / "0" / "0" / "swollen.sst", "wb") as swollen:
    swollen.truncate(500 * 2**20)
'''
