"""amoeba-nas: neural architecture search by regularized evolution."""

from setuptools import find_packages, setup

# Tested with: tensorflow-cpu 2.21.0, ray 2.60.0, numpy 2.4, pandas 3.1, absl-py 2.5,
# google-cloud-storage 3.17, scikit-learn 1.9, pytest 9, pytest-xdist 3.8, hypothesis 6 (Python 3.11, Linux x86_64).
LINUX_X86 = 'sys_platform == "linux" and platform_machine == "x86_64"'
LITERT = "ai-edge-litert>=2.0"
ONNX = ["tf2onnx>=1.17", "onnx>=1.17", "onnxruntime>=1.20"]
MLFLOW = "mlflow-skinny>=3.0"
NOT_LINUX_X86 = 'sys_platform != "linux" or platform_machine != "x86_64"'

setup(
    name="amoeba-nas",
    version="0.1.0",
    description="Neural architecture search by regularized evolution (AmoebaNet) on Ray Tune",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["core", "searchspace", "evolution", "trainer", "experiments", "experiments.*"]),
    package_data={"experiments": ["configs/*.cfg"]},
    install_requires=[
        f"tensorflow-cpu~=2.21.0; {LINUX_X86}",
        f"tensorflow~=2.21.0; {NOT_LINUX_X86}",
        "ray[tune]~=2.60.0",
        "numpy>=1.26",
        # TensorFlow needs >=0.5.1; 0.7.0's import costs 0.9 CPU-seconds more (0.94 s against 0.007 s
        # for 0.6.0 inside `import tensorflow`, here), paid by every trial worker that starts
        "ml_dtypes>=0.5.1,<0.7",
        "pandas>=2.2",
        "absl-py>=2.1",
        "google-cloud-storage>=2.18",
        "scikit-learn>=1.5",
        "matplotlib>=3.8",
        "tensorboard>=2.20",
    ],
    extras_require={
        # the runtimes of the export formats (core/export_formats.py), each optional: tested with
        # ai-edge-litert 2.3, tf2onnx 1.17, onnx 1.23, onnxruntime 1.32
        "litert": [LITERT],
        "onnx": ONNX,
        "mlflow": [MLFLOW],  # --mlflow_tracking_uri (tested with mlflow-skinny 3.18)
        "test": ["pytest>=8", "pytest-xdist>=3.5", "filelock>=3.12", "hypothesis>=6.100",
                 "pytest-timeout>=2.3", "gcp-storage-emulator>=2024.8", LITERT, *ONNX, MLFLOW],
    },
    entry_points={"console_scripts": ["amoeba=experiments.cli:run"]},
)
