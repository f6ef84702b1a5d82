def version():
    return (2, 99, 0)
