local count = state.count or 0
return { count = count + 1 }
