import ReactiveLoop
print("ReactiveLoop example")
