"""placeholder"""
def demo_meaning(name):
    from .meaning import OutputMeaning
    return OutputMeaning()
